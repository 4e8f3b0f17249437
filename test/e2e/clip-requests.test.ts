/**
 * Clip requests at their edges, with real peers and a real recorder: an operator's
 * `RecordingStorage` (here an in-memory one) receives every segment, each about `segmentSeconds`
 * long, of the track `recording.track` names; a clip longer than `maxClipSeconds` is capped; a
 * raw `request_clip` with a bad `duration_seconds` gets a correlated `recording_error`; clip
 * replies reach only the client that asked; and a clip the runtime does not answer within the
 * client's command timeout fails with `recording_error`.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { defineModel, startRuntime, type RecordingStorage, type Runtime } from '../../runtime/index.ts';
import { ArclightError } from '../../protocol/errors.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';

const LOOPBACK = '127.0.0.1';
const SEGMENT_SECONDS = 1;
const MAX_CLIP_SECONDS = 2;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps recordings in memory, and what was written, in order: an operator's own backend. */
class MemoryRecordingStorage implements RecordingStorage {
  readonly objects = new Map<string, Buffer>();
  readonly writes: string[] = [];

  async write(key: string, data: Buffer): Promise<void> {
    this.objects.set(key, Buffer.from(data));
    this.writes.push(key);
  }

  async read(key: string): Promise<Buffer> {
    const data = this.objects.get(key);
    if (!data) throw new ArclightError('not_found', `No recording file ${key}.`);
    return data;
  }

  async removePrefix(prefix: string): Promise<void> {
    for (const key of [...this.objects.keys()]) if (key.startsWith(`${prefix}/`)) this.objects.delete(key);
  }
}

/** Two output video tracks: the recording is told to take the second. */
const twoPictures = defineModel({
  name: 'two-pictures',
  fps: 30,
  tracks: [
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 },
    { name: 'overlay', kind: 'video', direction: 'recvonly', width: 96, height: 64 },
  ],
  async run(session) {
    const main = { width: 64, height: 64, format: 'i420' as const, data: new Uint8Array(64 * 64 * 1.5).fill(90) };
    const overlay = { width: 96, height: 64, format: 'i420' as const, data: new Uint8Array(96 * 64 * 1.5).fill(160) };
    for await (const _ of session.ticks()) {
      await session.emit('main_video', main);
      await session.emit('overlay', overlay);
    }
  },
});

function parsePlaylist(text: string, base: string): { init: string; segments: Array<{ url: string; duration: number }> } {
  const lines = text.split('\n');
  const init = new URL(/#EXT-X-MAP:URI="([^"]+)"/.exec(text)![1]!, base).href;
  const segments: Array<{ url: string; duration: number }> = [];
  lines.forEach((line, i) => {
    const match = /^#EXTINF:([\d.]+),/.exec(line);
    if (match) segments.push({ duration: Number(match[1]), url: new URL(lines[i + 1]!, base).href });
  });
  return { init, segments };
}

describe('clip requests (custom storage, named track, capped clips)', () => {
  let runtime: Runtime;
  const storage = new MemoryRecordingStorage();
  let owner: ArclightClient;
  let other: RawPeer | undefined;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: twoPictures as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      recording: { storage, track: 'overlay', segmentSeconds: SEGMENT_SECONDS, maxClipSeconds: MAX_CLIP_SECONDS },
    });
    owner = new ArclightClient({ modelName: 'two-pictures', local: true, localRuntimeUrl: runtime.url });
    await owner.connect();
    // A second client on the same session: it sees every envelope the runtime sends it.
    other = await openRawPeer(runtime.url, owner.getSessionId()!);
    await other.waitFor((m) => m.scope === 'runtime' && m.data.type === 'connection_info', 15_000);
    await sleep(4_500); // a few segments
  }, 60_000);
  afterAll(async () => {
    other?.close();
    await owner?.disconnect().catch(() => {});
    await runtime?.close();
  });

  it('the RecordingStorage passed in receives the named track’s segments, each about segmentSeconds long', async () => {
    const sessionId = owner.getSessionId()!;
    const whole = await owner.requestRecording();
    const playlist = parsePlaylist(await (await fetch(whole.playlistUrl)).text(), whole.playlistUrl);
    // Everything went to this storage, under the overlay track (not the first video track).
    expect(storage.writes[0]).toBe(`${sessionId}/overlay/init.mp4`);
    expect(storage.writes.every((key) => key.startsWith(`${sessionId}/overlay/`))).toBe(true);
    const stored = storage.writes.filter((key) => key.endsWith('.m4s'));
    expect(stored.length).toBe(playlist.segments.length);
    expect(playlist.segments.length).toBeGreaterThanOrEqual(3);
    // The runtime serves the stored bytes.
    const last = playlist.segments.at(-1)!;
    expect(Buffer.from(await (await fetch(last.url)).arrayBuffer()).equals(storage.objects.get(stored.at(-1)!)!)).toBe(true);
    // Segments are cut at the first frame past segmentSeconds (a frame or so over on a loaded
    // machine); the last one ended early, cut by this request.
    for (const segment of playlist.segments.slice(0, -1)) {
      expect(segment.duration).toBeGreaterThanOrEqual(SEGMENT_SECONDS - 0.05);
      expect(segment.duration).toBeLessThanOrEqual(SEGMENT_SECONDS + 0.5);
    }
    expect(last.duration).toBeLessThanOrEqual(SEGMENT_SECONDS + 0.5);
  }, 30_000);

  it('caps a clip at maxClipSeconds: never more, and less than a segment short (it starts at a boundary)', async () => {
    const whole = await owner.requestRecording();
    expect(whole.durationSeconds).toBeGreaterThan(MAX_CLIP_SECONDS + 2 * SEGMENT_SECONDS);
    const capped = await owner.requestClip(100);
    expect(capped.durationSeconds).toBeLessThanOrEqual(MAX_CLIP_SECONDS);
    expect(capped.durationSeconds).toBeGreaterThan(MAX_CLIP_SECONDS - SEGMENT_SECONDS - 0.5);
  }, 30_000);

  it('clip replies go only to the client that asked', async () => {
    const from = other!.messages.length;
    const clip = await owner.requestClip(1);
    expect(clip.playlistUrl).toContain('/clips/');
    await owner.requestRecording();
    await sleep(500); // had the reply gone to everyone, it would be here by now
    const seen = other!.messages.slice(from);
    expect(seen.filter((m) => m.data.type === 'clip_ready')).toEqual([]);
    expect(JSON.stringify(seen)).not.toContain(clip.clipId);
  }, 30_000);

  it('a raw request_clip with a bad duration_seconds gets a correlated recording_error', async () => {
    const bad: Array<[string, string]> = [
      ['-1', '-1'],
      ['0', '0'],
      ['a string', '"5"'],
      ['null (NaN as JSON)', 'null'],
      ['infinite', '1e999'],
      ['an object', '{"seconds":5}'],
    ];
    for (const [what, value] of bad) {
      const requestId = `bad-${what}`;
      const from = other!.messages.length;
      other!.sendRaw(
        `{"scope":"runtime","data":{"type":"request_clip","data":{"duration_seconds":${value}},"request_id":${JSON.stringify(requestId)}}}`,
      );
      const reply = await other!.waitFor((m) => m.data.request_id === requestId, 10_000, from);
      expect(reply.data.type, what).toBe('command_failed');
      expect(reply.data.data, what).toMatchObject({ code: 'recording_error', field: '/duration_seconds' });
    }
    const requestId = 'missing';
    other!.sendRaw(JSON.stringify({ scope: 'runtime', data: { type: 'request_clip', data: {}, request_id: requestId } }));
    expect((await other!.waitFor((m) => m.data.request_id === requestId, 10_000)).data.data).toMatchObject({ code: 'recording_error' });
    // A good one from the same peer is answered to it.
    other!.sendRaw(JSON.stringify({ scope: 'runtime', data: { type: 'request_clip', data: { duration_seconds: 1 }, request_id: 'good' } }));
    expect((await other!.waitFor((m) => m.data.request_id === 'good', 10_000)).data.type).toBe('clip_ready');
  }, 60_000);
});

/** Draws until told to stall; then sends nothing, so the recorder's open segment never closes. */
let stalled = false;
const staller = defineModel({
  name: 'staller',
  fps: 30,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }],
  commands: {
    stall: { handler: () => void (stalled = true) },
  },
  async run(session) {
    const frame = { width: 64, height: 64, format: 'i420' as const, data: new Uint8Array(64 * 64 * 1.5).fill(100) };
    for await (const _ of session.ticks()) if (!stalled) await session.emit('main_video', frame);
  },
});

describe('recording.track naming no output video track', () => {
  it('fails the runtime’s start, naming the tracks there are', async () => {
    await expect(
      startRuntime({
        model: twoPictures as never,
        port: 0,
        host: LOOPBACK,
        ice: { hostAddresses: [LOOPBACK] },
        playground: false,
        recording: { storage: new MemoryRecordingStorage(), track: 'no_such_track' },
      }),
    ).rejects.toThrow(
      /recording\.track "no_such_track" is not an output video track of model "two-pictures" \(its output video tracks: .+\)/,
    );
  });
});

describe('a clip the runtime does not answer in time', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({
      model: staller as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      recording: {},
    });
  });
  afterAll(async () => runtime?.close());

  it('fails with recording_error once the client’s command timeout passes', async () => {
    // The runtime cuts the open segment before answering, waiting up to 5 s for the next frame;
    // a stalled model sends none, so the answer comes after the client's 1.5 s timeout.
    const client = new ArclightClient({ modelName: 'staller', local: true, localRuntimeUrl: runtime.url, commandTimeoutMs: 1_500 });
    await client.connect();
    try {
      await sleep(1_500); // frames recorded
      await client.sendCommand('stall', {});
      await sleep(200);
      const started = Date.now();
      const error = await client.requestClip(1).then(
        () => undefined,
        (e: unknown) => e as ArclightError,
      );
      expect(error).toMatchObject({ code: 'recording_error' });
      expect(error?.cause).toMatchObject({ code: 'timeout' });
      expect(Date.now() - started).toBeLessThan(4_000); // the client's timeout, not the runtime's 5 s
    } finally {
      await client.disconnect().catch(() => {});
    }
  }, 30_000);
});
