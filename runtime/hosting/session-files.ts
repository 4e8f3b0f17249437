/**
 * What sessions leave behind them, opened together at start and closed together at the end:
 * uploaded files, recordings (for clips), and each session's log — with the URL signers that
 * presign uploads and clips. The folders the runtime made for itself (no `directory` given)
 * are removed at close; those an operator named are kept.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../server-kit/log.ts';
import { SessionLogRegistry } from '../logs/session-log-registry.ts';
import { RecordingRegistry } from '../recording/recording-registry.ts';
import { LocalDiskStorage } from '../recording/recording-storage.ts';
import type { RuntimeOptions } from '../runtime-options.ts';
import { UploadStore } from '../uploads/upload-store.ts';
import { UrlSigner } from '../uploads/url-signer.ts';

export interface SessionFiles {
  readonly uploads: UploadStore;
  /** Presigns upload URLs. */
  readonly urlSigner: UrlSigner;
  /** Absent: recording is off. */
  readonly recordings: RecordingRegistry | undefined;
  /** Presigns the clip URLs it issues and checks them. */
  readonly clipSigner: UrlSigner;
  readonly sessionLogs: SessionLogRegistry;
  /** Closes the recordings and logs, and removes the folders made at open. */
  close(): Promise<void>;
}

/** Opens uploads, recordings and session logs as the options say (the recording options already checked). */
export async function openSessionFiles(
  options: Pick<RuntimeOptions, 'uploads' | 'recording' | 'sessionLogs'>,
  log: Logger,
): Promise<SessionFiles> {
  const uploadDirectory = options.uploads?.directory ?? (await mkdtemp(join(tmpdir(), 'arclight-uploads-')));
  const uploads = new UploadStore(uploadDirectory, options.uploads);
  const urlSigner = new UrlSigner(options.uploads?.now ? { now: options.uploads.now } : {});
  const recording = options.recording;
  const recordingDirectory =
    recording && !recording.storage ? (recording.directory ?? (await mkdtemp(join(tmpdir(), 'arclight-recordings-')))) : undefined;
  // One signer for the clip URLs it issues and checks (its own clock when the recording has one).
  const clipSigner = recording?.now ? new UrlSigner({ now: recording.now }) : urlSigner;
  const recordings = recording
    ? new RecordingRegistry(
        { ...recording, storage: recording.storage ?? new LocalDiskStorage(recordingDirectory!) },
        clipSigner,
        log.child({ component: 'recording' }),
        recording.now,
      )
    : undefined;
  // The session logs' window and clock are the recordings' (the spec's five minutes).
  const sessionLogs = new SessionLogRegistry({
    ...(recording?.retainAfterEndMs !== undefined ? { retainAfterEndMs: recording.retainAfterEndMs } : {}),
    ...(recording?.now ? { now: recording.now } : {}),
    ...options.sessionLogs,
  });
  return {
    uploads,
    urlSigner,
    recordings,
    clipSigner,
    sessionLogs,
    async close() {
      if (options.uploads?.directory === undefined) await rm(uploadDirectory, { recursive: true, force: true });
      await recordings?.close();
      sessionLogs.close();
      if (recordingDirectory && recording?.directory === undefined) await rm(recordingDirectory, { recursive: true, force: true });
    },
  };
}
