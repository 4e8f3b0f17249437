/**
 * Output frame metadata (media engine part 6): a mapping per frame travels as JSON, bytes travel
 * unchanged, a batch carries one value; each arrives keyed by the RTP timestamp the client sees
 * on that very frame.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient, type FrameMetadataEvent } from '../../client/node.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { decodeFrameMetadata, type FrameMetadataData } from '../../protocol/frame-metadata.ts';
import metadataModel, { BATCH_BYTES } from '../fixtures/metadata-model.ts';
import { waitUntil } from '../support/video-probe.ts';
import { openWeriftPeer, type WeriftPeer } from '../support/werift-peer.ts';

const LOOPBACK = '127.0.0.1';

describe('frame metadata', () => {
  let runtime: Runtime;
  let peer: WeriftPeer | undefined;
  beforeAll(async () => {
    runtime = await startRuntime({ model: metadataModel as never, port: 0, host: LOOPBACK, ice: { hostAddresses: [LOOPBACK] } });
  });
  afterAll(async () => {
    await peer?.close();
    await runtime?.close();
  });

  it('arrives keyed by the RTP timestamp of its own frame, per frame and per batch', async () => {
    peer = await openWeriftPeer(runtime.url, { videoMime: 'video/H264' });
    const frameTimestamps = new Set<number>();
    peer.onVideoRtp((rtp) => {
      if (rtp.header.marker) frameTimestamps.add(rtp.header.timestamp);
    });
    const metadata: FrameMetadataData[] = [];
    peer.channel.onMessage.subscribe((raw) => {
      const message = JSON.parse(String(raw)) as { data: { type: string; data: FrameMetadataData } };
      if (message.data.type === 'frame_metadata') metadata.push(message.data.data);
    });
    await waitUntil(() => metadata.length >= 30, 10_000, '30 frames of metadata');
    const perFrame = metadata.slice(0, 30).filter((m) => !('$bytes' in m.metadata));
    // The last frames' packets may still be on their way: wait for them (however long a loaded
    // machine takes, instead of a fixed 200 ms); a metadata whose frame never comes still fails.
    await waitUntil(() => perFrame.every((m) => frameTimestamps.has(m.rtp_timestamp)), 5_000, 'the frames of the metadata received').catch(
      () => {},
    );
    // Every metadata timestamp is the timestamp of a frame this client received, in order.
    for (const m of perFrame) expect(frameTimestamps.has(m.rtp_timestamp)).toBe(true);
    const frames = perFrame.map((m) => (m.metadata as { frame: number }).frame);
    expect(frames).toEqual([...frames].sort((a, b) => a - b));
    expect(perFrame[0]!.metadata).toMatchObject({ label: `f${frames[0]}` });
  });

  it('hands bytes to the client unchanged, through the client library', async () => {
    await peer?.close();
    peer = undefined;
    await fetch(`${runtime.url}/stop_session`, { method: 'POST' });
    const client = new ArclightClient({ modelName: 'metadata', local: true, localRuntimeUrl: runtime.url });
    const events: FrameMetadataEvent[] = [];
    client.on('frameMetadata', (event) => events.push(event));
    await client.connect();
    try {
      await waitUntil(() => events.length > 5, 10_000, 'frame metadata events');
      await client.sendCommand('batch', {});
      await waitUntil(() => events.some((e) => e.metadata instanceof Uint8Array), 5_000, 'the batch bytes');
      const batch = events.filter((e) => e.metadata instanceof Uint8Array);
      expect(batch).toHaveLength(1); // one value per batch, on its first frame
      expect([...(batch[0]!.metadata as Uint8Array)]).toEqual([...BATCH_BYTES]);
      const last = events.at(-1)!;
      expect(client.getFrameMetadata(last.track, last.rtpTimestamp)).toEqual(last.metadata);
      expect(decodeFrameMetadata({ $bytes: 'AAEC' })).toEqual(Uint8Array.from([0, 1, 2]));
    } finally {
      await client.disconnect();
    }
  });
});
