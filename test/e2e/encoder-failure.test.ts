/**
 * A video encoder that fails mid-stream (libx264 here, made to fail by the test-only hook in
 * runtime/faults/encoder-faults.ts) must not freeze the picture or end the session: the runtime
 * frees it and opens a fresh one, whose first frame is a keyframe the viewer decodes from, and
 * commands keep working. Twenty failures in a row leak no file descriptor, encoder or memory.
 *
 * Everything runs on 127.0.0.1; the viewer is a werift peer that decodes H.264 with FFmpeg.
 */
import { readdirSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import type { Logger } from '../../server-kit/log.ts';
import { clearVideoEncodeFaults, failNextVideoEncodes, pendingVideoEncodeFaults } from '../../runtime/faults/encoder-faults.ts';
import { openVideoEncoderCount } from '../../runtime/media/open-encoders.ts';
import { rgbToYuv } from '../../models/examples/shared/i420-canvas.ts';
import solidColourModel from '../fixtures/solid-colour-model.ts';
import { openEncoderFailureViewer, type EncoderFailureViewer } from '../support/encoder-failure-viewer.ts';
import { readRuntimeEvents } from '../support/event-stream-reader.ts';
import type { SessionLogPage } from '../../protocol/session-logs.ts';
import { near, waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';
const RED = rgbToYuv(0xe0, 0x10, 0x10);
const BLUE = rgbToYuv(0x10, 0x20, 0xe0);

/** A logger that keeps the messages it is given (and prints nothing). */
function captureLogger(messages: string[]): Logger {
  const at = () => (msg: string) => void messages.push(msg);
  return { debug: at(), info: at(), warn: at(), error: at(), child: () => captureLogger(messages) };
}

function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

async function metricsText(runtime: Runtime): Promise<string> {
  return (await fetch(`${runtime.url}/metrics`)).text();
}

describe('a video encoder failing mid-stream (libx264, test fault injection)', () => {
  let runtime: Runtime;
  const logged: string[] = [];
  let viewer: EncoderFailureViewer | undefined;
  /** Set when faults are armed; with none left pending, a frame decoded since came after the failure. */
  let faultsArmed = false;
  const faultsFired = (): boolean => faultsArmed && pendingVideoEncodeFaults() === 0;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: solidColourModel as never,
      logger: captureLogger(logged),
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
    });
  }, 60_000);

  afterEach(async () => {
    clearVideoEncodeFaults();
    faultsArmed = false;
    await viewer?.close();
    viewer = undefined;
  });

  afterAll(async () => {
    await runtime?.close();
  });

  /** Arms `count` H.264 encode failures and waits until they have all fired. */
  async function failEncodes(count: number): Promise<void> {
    faultsArmed = true;
    failNextVideoEncodes(count, { codec: 'h264' });
    await waitUntil(faultsFired, 10_000, `${count} injected encoder failures`);
  }

  it('restarts the encoder: the viewer decodes a keyframe and the picture after it, the session stays up and a command still works', async () => {
    const events = await readRuntimeEvents(runtime.url);
    viewer = await openEncoderFailureViewer(runtime.url, faultsFired);
    const v = viewer;
    await waitUntil(() => v.decoded.length >= 10 && near(v.decoded.at(-1)!.centre, RED, 3), 10_000, '10 decoded frames of the red picture');

    await failEncodes(1);
    await waitUntil(() => v.decoded.filter((f) => f.mark).length >= 10, 10_000, '10 frames decoded after the failure');
    const after = v.decoded.filter((f) => f.mark);
    // The fresh encoder's first frame is an IDR: without it nothing after it would decode.
    expect(after.some((f) => f.keyframe)).toBe(true);
    expect(near(after.at(-1)!.centre, RED, 3)).toBe(true);

    const session = (await (await fetch(`${runtime.url}/sessions/${v.peer.session.session_id}`)).json()) as {
      state: string;
      connections: number[];
    };
    expect(session.state).toBe('ACTIVE');
    expect(session.connections).toHaveLength(1);
    await v.command('set_color', { r: 0x10, g: 0x20, b: 0xe0 });
    await waitUntil(() => near(v.decoded.at(-1)!.centre, BLUE, 3), 10_000, 'the blue picture the command asked for');

    const text = await metricsText(runtime);
    expect(text).toMatch(/arclight_video_encoder_failures_total\{track="main_video",codec="h264",backend="libx264",action="restart"\} 1\b/);
    expect(text).toMatch(/arclight_frames_dropped_total\{track="main_video",reason="encode_error"\} 1\b/);
    // libx264 is the last candidate: it is restarted, never demoted.
    expect(text).toContain('arclight_encoder_backend{codec="h264",backend="libx264",hardware="false"} 1');

    // Operators hear of it on /events, and the session's log says it (protocol.md "Runtime
    // events" and "Session logs"): one restart, with the backend, phase and why.
    const sessionId = v.peer.session.session_id;
    const failed = { track: 'main_video', codec: 'h264', backend: 'libx264', phase: 'encode', action: 'restart' };
    try {
      await waitUntil(() => events.ofSession(sessionId).some((e) => e.type === 'encoder_failed'), 5_000, 'encoder_failed on /events');
      const ofSession = events.ofSession(sessionId);
      expect(ofSession.filter((e) => e.type === 'encoder_failed')).toEqual([
        expect.objectContaining({ ...failed, session_id: sessionId, reason: expect.any(String) }),
      ]);
      // Opened, failed, opened again (the fresh encoder).
      expect(
        ofSession
          .filter((e) => e.type === 'encoder_opened' || e.type === 'encoder_failed')
          .map((e) => e.type)
          .slice(0, 3),
      ).toEqual(['encoder_opened', 'encoder_failed', 'encoder_opened']);
    } finally {
      events.stop();
    }
    const log = (await (await fetch(`${runtime.url}/sessions/${sessionId}/logs?limit=1000`)).json()) as SessionLogPage;
    const line = log.lines.find((l) => l.message.startsWith('video encoder failed'));
    expect(line).toMatchObject({
      source: 'runtime',
      level: 'warn',
      message: 'video encoder failed (encode); a fresh one follows',
      fields: { track: 'main_video', stream: 'h264', backend: 'libx264', phase: 'encode', action: 'restart' },
    });
  }, 30_000);

  it('restarts it 20 times in a row without leaking file descriptors, encoders or memory, and streams on', async () => {
    viewer = await openEncoderFailureViewer(runtime.url, faultsFired);
    const v = viewer;
    await waitUntil(() => v.decoded.length >= 10, 10_000, '10 decoded frames');
    const fdsBefore = openFds();
    const encodersBefore = openVideoEncoderCount();
    const rssBefore = process.memoryUsage().rss;

    await failEncodes(20);
    await waitUntil(() => v.decoded.filter((f) => f.mark).length >= 10, 10_000, '10 frames decoded after 20 failures');
    expect(v.decoded.filter((f) => f.mark).some((f) => f.keyframe)).toBe(true);

    const rssGrowthMb = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    console.info(
      `20 encoder restarts: fds ${fdsBefore} → ${openFds()}, open encoders ${encodersBefore} → ${openVideoEncoderCount()}, RSS ${rssGrowthMb >= 0 ? '+' : ''}${rssGrowthMb.toFixed(1)} MiB`,
    );
    // The same encoders are open as before (this session's pipeline, whatever black-frame
    // encoder is mid-flight); each failed one was freed.
    expect(openVideoEncoderCount()).toBe(encodersBefore);
    // A couple of descriptors of slack for the runtime's own sockets and timers coming and going.
    expect(openFds()).toBeLessThanOrEqual(fdsBefore + 3);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(150 * 1024 * 1024);
    const text = await metricsText(runtime);
    expect(text).toMatch(
      /arclight_video_encoder_failures_total\{track="main_video",codec="h264",backend="libx264",action="restart"\} (2[01])\b/,
    );
  }, 30_000);

  it('an encoder that fails every frame costs only the picture: frames are dropped, the error is logged at a bounded rate, commands work, and the picture returns once it recovers', async () => {
    viewer = await openEncoderFailureViewer(runtime.url);
    const v = viewer;
    await waitUntil(() => v.decoded.length >= 5, 10_000, '5 decoded frames');
    const errorsBefore = logged.filter((m) => m.startsWith('video frame could not be encoded')).length;
    failNextVideoEncodes(Infinity, { codec: 'h264' });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // ~45 failed frames, at most one error line per 5 s.
    expect(logged.filter((m) => m.startsWith('video frame could not be encoded')).length - errorsBefore).toBeLessThanOrEqual(1);
    await v.command('set_color', { r: 0x10, g: 0x20, b: 0xe0 });
    const session = (await (await fetch(`${runtime.url}/sessions/${v.peer.session.session_id}`)).json()) as { state: string };
    expect(session.state).toBe('ACTIVE');

    clearVideoEncodeFaults();
    await waitUntil(() => near(v.decoded.at(-1)!.centre, BLUE, 3), 10_000, 'the blue picture once the encoder recovers');
  }, 30_000);
});
