/**
 * What `session.emit()` checks before it takes a frame, in one place so that the runtime and the
 * model test harness (`arclight/testing`) refuse the same calls with the same errors: a model
 * learns about a bad frame at its emit(), in tests as in production, not as an encoder failure later.
 */

import { ArclightError } from '../../protocol/errors.ts';
import { assertCudaFrame, isCudaVideoFrame } from './cuda-frames.ts';
import { assertFrameShape } from './frame-convert.ts';
import type { AudioFrame, CudaVideoFrame, FrameMetadata, VideoFrame } from './frames.ts';

/** What one `emit()` call may be given: a frame, or a batch (an array) of one kind. */
export type EmitFrames = VideoFrame | CudaVideoFrame | AudioFrame | readonly (VideoFrame | CudaVideoFrame)[] | readonly AudioFrame[];

/** The rejection of an emit() after its session ended (code `session_ended`: a normal end of `run`). */
export function emitAfterEndError(sessionId: string): ArclightError {
  return new ArclightError('session_ended', `Session ${sessionId} has ended; emit() is closed.`);
}

/** The rejection of an emit() to a track the model does not declare as an output. */
export function unknownOutputTrackError(track: string): TypeError {
  return new TypeError(`emit("${track}"): the model declares no output track "${track}"`);
}

/** An emit()'s frames as a batch for the video output `track`; a TypeError when one is not video. */
export function videoBatch(track: string, frames: EmitFrames): readonly (VideoFrame | CudaVideoFrame)[] {
  const batch = asBatch(frames);
  if (batch.some((f) => !f || !('width' in f))) throw new TypeError(`emit("${track}"): "${track}" is a video track; got something else`);
  return batch as readonly (VideoFrame | CudaVideoFrame)[];
}

/** An emit()'s frames as a batch for the audio output `track`; a TypeError when one is not audio. */
export function audioBatch(track: string, frames: EmitFrames): readonly AudioFrame[] {
  const batch = asBatch(frames);
  if (batch.some((f) => !f || !('samples' in f))) throw new TypeError(`emit("${track}"): "${track}" is an audio track; got something else`);
  return batch as readonly AudioFrame[];
}

/**
 * Throws what a video track's emit() rejects with: a frame without width, height and data (or a
 * malformed CUDA frame) — TypeError; pixels that do not fill the frame's stated size and format —
 * RangeError; metadata that is neither bytes nor a JSON-serializable mapping — TypeError. A frame
 * of another width and height than the track's is fine: it is scaled.
 */
export function assertEmittableVideo(track: string, batch: readonly (VideoFrame | CudaVideoFrame)[], batchMetadata?: FrameMetadata): void {
  for (const frame of batch) {
    if (isCudaVideoFrame(frame)) {
      assertCudaFrame(track, frame);
    } else {
      if (!frame || !(frame.width > 0 && frame.height > 0) || !(frame.data instanceof Uint8Array)) {
        throw new TypeError(`emit("${track}"): a video frame needs width, height and data (Uint8Array)`);
      }
      try {
        assertFrameShape(frame);
      } catch (error) {
        throw new RangeError(`emit("${track}"): ${(error as Error).message}`);
      }
    }
    if (frame.metadata !== undefined) assertMetadata(track, frame.metadata);
  }
  if (batchMetadata !== undefined) assertMetadata(track, batchMetadata);
}

/** Throws the TypeError an audio track's emit() rejects with: not 48 kHz, or not 1 or 2 channels. */
export function assertEmittableAudio(track: string, frame: AudioFrame, sampleRate: number): void {
  if (frame.sampleRate !== sampleRate) {
    throw new TypeError(`emit("${track}"): audio must be ${sampleRate} Hz, got ${frame.sampleRate}`);
  }
  if (frame.channels !== 1 && frame.channels !== 2) throw new TypeError(`audio with ${frame.channels} channels is not supported (1 or 2)`);
}

/** Metadata must be bytes or a JSON-serializable mapping; a model learns at emit(), not later. */
function assertMetadata(track: string, metadata: FrameMetadata): void {
  if (metadata instanceof Uint8Array) return;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new TypeError(`emit("${track}"): metadata must be a Uint8Array or a plain object`);
  }
  try {
    JSON.stringify(metadata);
  } catch (error) {
    throw new TypeError(`emit("${track}"): metadata must be JSON-serializable (${(error as Error).message})`);
  }
}

function asBatch(frames: EmitFrames): ReadonlyArray<VideoFrame | CudaVideoFrame | AudioFrame> {
  return (Array.isArray(frames) ? frames : [frames]) as ReadonlyArray<VideoFrame | CudaVideoFrame | AudioFrame>;
}
