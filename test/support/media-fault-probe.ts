/**
 * A Node client (wrtc, VP8) watched for the media-fault test and bench: the arrival time of
 * every decoded frame of `main_video`, and the receiver's own counters from wrtc's getStats()
 * (PLIs and NACKs it sent, keyframes it decoded) — the client's view of recovery.
 */

import { ArclightClient, nodeWebRtc, wrtc } from '../../client/node.ts';

/** The client's inbound video counters (libwebrtc inbound-rtp). */
export interface InboundVideoCounters {
  readonly framesDecoded: number;
  readonly keyFramesDecoded: number;
  readonly pliCount: number;
  readonly nackCount: number;
  readonly packetsLost: number;
  readonly packetsReceived: number;
}

/** Arrival times (performance.now()) of decoded frames. */
export class FrameArrivals {
  readonly times: number[] = [];

  note(at: number): void {
    this.times.push(at);
  }

  get count(): number {
    return this.times.length;
  }

  /** Frames that arrived in [from, to). */
  between(from: number, to: number): number {
    return this.times.filter((t) => t >= from && t < to).length;
  }

  /** The first frame at or after `at`, if any. */
  firstAfter(at: number): number | undefined {
    return this.times.find((t) => t >= at);
  }

  /** Longest time without a decoded frame in [from, to), ms (edges count as frames). */
  longestGap(from: number, to: number): number {
    let previous = from;
    let longest = 0;
    for (const t of this.times) {
      if (t < from) continue;
      if (t >= to) break;
      longest = Math.max(longest, t - previous);
      previous = t;
    }
    return Math.max(longest, to - previous);
  }
}

export interface WatchedClient {
  readonly client: ArclightClient;
  readonly frames: FrameArrivals;
  counters(): Promise<InboundVideoCounters>;
  close(): Promise<void>;
}

type VideoSink = { stop(): void; onframe: (() => void) | null };

/** Connects a client to a local runtime and watches its video until `close()`. */
export async function connectWatchedClient(runtimeUrl: string, modelName = 'pattern'): Promise<WatchedClient> {
  const peers: RTCPeerConnection[] = [];
  // The client keeps its peer private; a subclass records it for getStats().
  const Base = nodeWebRtc.RTCPeerConnection;
  class RecordedPeer extends Base {
    constructor(configuration?: RTCConfiguration) {
      super(configuration);
      peers.push(this);
    }
  }
  const client = new ArclightClient({
    modelName,
    local: true,
    localRuntimeUrl: runtimeUrl,
    rtc: { ...nodeWebRtc, RTCPeerConnection: RecordedPeer as unknown as typeof RTCPeerConnection },
  });
  const frames = new FrameArrivals();
  const sinks: VideoSink[] = [];
  client.on('trackReceived', (name, track) => {
    if (name !== 'main_video' || track.kind !== 'video') return;
    const Sink = (wrtc as unknown as { nonstandard: { RTCVideoSink: new (t: MediaStreamTrack) => VideoSink } }).nonstandard.RTCVideoSink;
    const sink = new Sink(track);
    sink.onframe = () => frames.note(performance.now());
    sinks.push(sink);
  });
  await client.connect();
  return {
    client,
    frames,
    counters: async () => inboundVideoCounters(peers.at(-1)),
    close: async () => {
      for (const sink of sinks) sink.stop();
      await client.disconnect().catch(() => {});
    },
  };
}

async function inboundVideoCounters(pc: RTCPeerConnection | undefined): Promise<InboundVideoCounters> {
  const zero = { framesDecoded: 0, keyFramesDecoded: 0, pliCount: 0, nackCount: 0, packetsLost: 0, packetsReceived: 0 };
  if (!pc) return zero;
  const report = await pc.getStats();
  let found: InboundVideoCounters = zero;
  report.forEach((entry: Record<string, unknown>) => {
    if (entry['type'] !== 'inbound-rtp' || (entry['kind'] ?? entry['mediaType']) !== 'video') return;
    const n = (key: keyof InboundVideoCounters): number => (typeof entry[key] === 'number' ? (entry[key] as number) : 0);
    found = {
      framesDecoded: n('framesDecoded'),
      keyFramesDecoded: n('keyFramesDecoded'),
      pliCount: n('pliCount'),
      nackCount: n('nackCount'),
      packetsLost: n('packetsLost'),
      packetsReceived: n('packetsReceived'),
    };
  });
  return found;
}

/** The runtime's count of RTP packets resent on NACK for `main_video` (from /metrics). */
export async function retransmittedPackets(runtimeUrl: string): Promise<number> {
  const exposition = await (await fetch(`${runtimeUrl}/metrics`)).text();
  const match = /^arclight_rtp_retransmitted_packets_total\{track="main_video"\} (\d+)$/m.exec(exposition);
  return Number(match?.[1] ?? 0);
}
