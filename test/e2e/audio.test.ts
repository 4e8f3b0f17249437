/** Opus both ways, Node client (wrtc) ↔ runtime on loopback. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import pattern from '../../models/examples/pattern/index.ts';
import audioLoop from '../fixtures/audio-loop-model.ts';
import { AudioProbe, startSine } from '../support/audio-probe.ts';
import { waitUntil, waitUntilStill } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';

function probeAudio(client: ArclightClient, name: string): Promise<AudioProbe> {
  return new Promise((resolve) => {
    client.on('trackReceived', (trackName, track) => {
      if (trackName === name && track.kind === 'audio') resolve(new AudioProbe(track));
    });
  });
}

describe('audio out: pattern tone', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => runtime?.close());

  it('plays the tone, silences it on command, and sends nothing while paused', async () => {
    const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
    const probePromise = probeAudio(client, 'tone');
    await client.connect();
    const probe = await probePromise;
    try {
      // Volume 0.2 of full scale ≈ 6550 peak, ≈ 4600 RMS; allow for Opus and the receiver's processing.
      await waitUntil(() => probe.level > 1500, 10_000, 'the tone');
      await client.sendCommand('set_tone', { frequency: 0 });
      await waitUntil(() => probe.level < 200, 10_000, 'silence');
      client.pauseTrack('tone');
      // The runtime's own count of audio frames sent: it must stand still while paused. The pause
      // is in force once a later request on the same ordered channel is answered; frames already
      // in the encoder then leave: wait for the count to settle (a loaded machine's encoder can
      // outlast a fixed 500 ms) before watching it for a second.
      const sent = async () => (await runtime.metrics.framesSent.get()).values.find((v) => v.labels.track === 'tone')?.value ?? 0;
      await client.sendCommand('get_state', {});
      await waitUntilStill(sent, 300, 10_000, 'the tone frames sent');
      const before = await sent();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await sent()).toBe(before);
      await client.sendCommand('set_tone', { frequency: 660, volume: 0.3 });
      client.resumeTrack('tone');
      await waitUntil(() => probe.level > 1500, 10_000, 'the tone after resume');
      expect(await sent()).toBeGreaterThan(before + 10);
    } finally {
      probe.stop();
      await client.disconnect();
    }
  });
});

describe('audio in: a published microphone reaches the model', () => {
  let runtime: Runtime;
  beforeAll(async () => {
    runtime = await startRuntime({ model: audioLoop as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => runtime?.close());

  it('decodes the client Opus stream, and loops it back', async () => {
    const client = new ArclightClient({ modelName: 'audio-loop', local: true, localRuntimeUrl: runtime.url });
    const probePromise = probeAudio(client, 'speaker');
    await client.connect();
    const probe = await probePromise;
    const sine = startSine(440, 8000);
    try {
      await client.publishTrack('mic', sine.track);
      await waitUntil(
        async () => {
          const reply = await client.sendCommand('get_level', {});
          const level = reply?.data as { rms: number; frames: number };
          return level.frames > 20 && level.rms > 2000;
        },
        15_000,
        'the model to hear the sine',
      );
      await waitUntil(() => probe.level > 1500, 10_000, 'the loop back');
    } finally {
      sine.stop();
      probe.stop();
      await client.disconnect();
    }
  });
});
