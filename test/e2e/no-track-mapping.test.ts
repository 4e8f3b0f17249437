/**
 * A plain WebRTC client that sends no `track_mapping`: the runtime pairs its m-lines with the
 * model's tracks by kind and direction, in declaration order. The `echo` model declares its
 * input (`webcam`, the client sends) before its output (`main_video`, the client receives), and a
 * raw wrtc peer offers one m-line for each in that order — so pairing by the wrong direction
 * (werift's `offerDirection` is the runtime's side: a client's `recvonly` reads `sendonly`)
 * would bind the client's receiving m-line to the input and no video would arrive.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import echo from '../../models/examples/echo/index.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { openRawPeer, type RawPeer } from '../support/raw-peer.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';

describe('a client without track_mapping', () => {
  let runtime: Runtime;
  let peer: RawPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({ model: echo as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] }, playground: false });
  });
  afterAll(async () => {
    peer?.close();
    await runtime?.close();
  });

  it('gets the output video on its receiving m-line (paired by direction from the client side)', async () => {
    const started = (await (
      await fetch(`${runtime.url}/start_session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { session_id: string };
    peer = await openRawPeer(runtime.url, started.session_id, { sendTrackMapping: false });
    const receiving = peer.pc.getTransceivers().find((t) => t.direction === 'recvonly')!;
    expect(receiving.currentDirection).toBe('recvonly'); // the runtime answered sendonly on it
    const framesDecoded = async () => {
      let decoded = 0;
      (await peer!.pc.getStats()).forEach((s: { type: string; kind?: string; framesDecoded?: number }) => {
        if (s.type === 'inbound-rtp' && s.kind === 'video') decoded += s.framesDecoded ?? 0;
      });
      return decoded;
    };
    await waitUntil(async () => (await framesDecoded()) >= 5, 20_000, 'five decoded frames of main_video');
  }, 40_000);
});
