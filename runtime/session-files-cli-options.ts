/**
 * `arclight serve`'s flags for what a session leaves on the runtime's disk — uploads and the
 * recording — → `RuntimeOptions.uploads` and `RuntimeOptions.recording`. None of them is a
 * secret, so all are flags (an operator's limits belong in the command they can read back in `ps`).
 */

import { resolve } from 'node:path';
import type { RuntimeOptions } from './server.ts';
import { DEFAULT_SEGMENT_SECONDS, type RecordingEncoder } from './recording/track-recorder.ts';

/** The flags as `util.parseArgs` gives them. */
export interface SessionFilesFlags {
  readonly 'upload-max-bytes'?: string;
  readonly 'upload-mime-type'?: readonly string[];
  readonly 'upload-max-files'?: string;
  readonly 'upload-dir'?: string;
  readonly 'no-recording'?: boolean;
  readonly 'recording-dir'?: string;
  readonly 'recording-track'?: string;
  readonly 'recording-segment-seconds'?: string;
  readonly 'recording-bitrate'?: string;
  readonly 'recording-encoder'?: string;
  readonly 'max-clip-seconds'?: string;
}

export interface SessionFilesOptions {
  readonly uploads?: NonNullable<RuntimeOptions['uploads']>;
  /** Absent: no recording (`--no-recording`). */
  readonly recording?: NonNullable<RuntimeOptions['recording']>;
}

const RECORDING_FLAGS = [
  'recording-dir',
  'recording-track',
  'recording-segment-seconds',
  'recording-bitrate',
  'recording-encoder',
  'max-clip-seconds',
] as const;
const SIZE_UNITS: Readonly<Record<string, number>> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 };

/** The upload and recording options, or the message to print (exit 2) when a flag is wrong. */
export function sessionFilesOptionsFromFlags(flags: SessionFilesFlags): SessionFilesOptions | { error: string } {
  let maxBytes: number | undefined;
  if (flags['upload-max-bytes'] !== undefined) {
    // Bytes, or K/M/G (binary: 100M is 100 MiB, the default).
    const match = /^(\d{1,15})([KMG]?)$/i.exec(flags['upload-max-bytes']);
    maxBytes = match ? Number(match[1]) * SIZE_UNITS[match[2]!.toUpperCase()]! : NaN;
    if (!(maxBytes >= 1) || !Number.isSafeInteger(maxBytes))
      return { error: `--upload-max-bytes must be a positive number of bytes (e.g. 10485760 or 10M); got "${flags['upload-max-bytes']}"` };
  }
  const mimeTypes = flags['upload-mime-type'];
  for (const type of mimeTypes ?? []) {
    if (!/^[\w.+-]+\/([\w.+-]+|\*)$/.test(type))
      return { error: `--upload-mime-type must be a MIME type (image/png) or a family (image/*); got "${type}"` };
  }
  const maxFiles = positiveInteger(flags['upload-max-files']);
  if (Number.isNaN(maxFiles)) return { error: '--upload-max-files must be a positive whole number' };
  const uploads = {
    ...(maxBytes !== undefined ? { maxBytes } : {}),
    ...(mimeTypes ? { mimeTypes: [...mimeTypes] } : {}),
    ...(maxFiles !== undefined ? { maxFilesPerSession: maxFiles } : {}),
    ...(flags['upload-dir'] !== undefined ? { directory: resolve(flags['upload-dir']) } : {}),
  };

  if (flags['no-recording']) {
    const given = RECORDING_FLAGS.find((flag) => flags[flag] !== undefined);
    // Refused rather than ignored: an operator who set a clip cap expects it to mean something.
    if (given) return { error: `--${given} configures the recording; it cannot be combined with --no-recording` };
    return Object.keys(uploads).length > 0 ? { uploads } : {};
  }
  const segmentSeconds = positiveNumber(flags['recording-segment-seconds']);
  if (Number.isNaN(segmentSeconds) || segmentSeconds! > 60)
    return { error: '--recording-segment-seconds must be a number of seconds above 0, at most 60' };
  const bitrateKbps = positiveInteger(flags['recording-bitrate']);
  if (Number.isNaN(bitrateKbps)) return { error: '--recording-bitrate must be a positive whole number of kbit/s' };
  const encoderFlag = flags['recording-encoder'];
  if (encoderFlag !== undefined && encoderFlag !== 'shared' && encoderFlag !== 'own')
    return { error: `--recording-encoder must be shared or own; got "${encoderFlag}"` };
  const encoder: RecordingEncoder | undefined = encoderFlag;
  const maxClipSeconds = positiveNumber(flags['max-clip-seconds']);
  if (Number.isNaN(maxClipSeconds)) return { error: '--max-clip-seconds must be a positive number of seconds' };
  // A clip is whole segments and never longer than the cap, so the cap must hold one.
  if (maxClipSeconds !== undefined && maxClipSeconds < (segmentSeconds ?? DEFAULT_SEGMENT_SECONDS)) {
    return {
      error: `--max-clip-seconds must be at least the segment length (${segmentSeconds ?? DEFAULT_SEGMENT_SECONDS} s): a clip is whole segments`,
    };
  }
  const track = flags['recording-track'];
  if (track !== undefined && !/^[\w-]{1,64}$/.test(track))
    return { error: `--recording-track must be an output video track's name; got "${track}"` };
  const recording = {
    ...(flags['recording-dir'] !== undefined ? { directory: resolve(flags['recording-dir']) } : {}),
    ...(track !== undefined ? { track } : {}),
    ...(segmentSeconds !== undefined ? { segmentSeconds } : {}),
    ...(bitrateKbps !== undefined ? { bitrateKbps } : {}),
    ...(encoder !== undefined ? { encoder } : {}),
    ...(maxClipSeconds !== undefined ? { maxClipSeconds } : {}),
  };
  return { ...(Object.keys(uploads).length > 0 ? { uploads } : {}), recording };
}

/** undefined when absent, NaN when not a positive whole number. */
function positiveInteger(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return /^\d{1,9}$/.test(value) && Number(value) > 0 ? Number(value) : NaN;
}

/** undefined when absent, NaN when not a positive number. */
function positiveNumber(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  return /^\d{1,9}(\.\d+)?$/.test(value) && Number(value) > 0 ? Number(value) : NaN;
}
