/**
 * Our side of a lab scenario: the project's Node client (wrtc) connecting to an Arclight runtime
 * through the lab. The client is pointed at the lab's signalling proxy instead of the runtime, so
 * the SDP both ways names the relay; nothing in the client or the runtime changes.
 */

import { ArclightClient, nodeWebRtc } from '../../../client/node.ts';
import type { NetworkLab } from './network-lab.ts';
import type { SignallingProxy } from './signalling-proxy.ts';
import { StampedReceiver, type StampedReceiverOptions } from './stamped-receiver.ts';

export interface ArclightThroughLab {
  readonly client: ArclightClient;
  readonly proxy: SignallingProxy;
  /** The client's peer (for getStats), once it has one. */
  peer(): RTCPeerConnection | undefined;
  /** Resolves with the watched `main_video` track. */
  readonly video: Promise<StampedReceiver>;
  close(): Promise<void>;
}

export async function connectArclightThroughLab(
  lab: NetworkLab,
  runtimeUrl: string,
  options: { readonly modelName: string } & StampedReceiverOptions,
): Promise<ArclightThroughLab> {
  const proxy = await lab.proxyHttp(runtimeUrl);
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
    modelName: options.modelName,
    local: true,
    localRuntimeUrl: proxy.url,
    rtc: { ...nodeWebRtc, RTCPeerConnection: RecordedPeer as unknown as typeof RTCPeerConnection },
  });
  let watched: StampedReceiver | undefined;
  const video = new Promise<StampedReceiver>((resolve) => {
    client.on('trackReceived', (name, track) => {
      if (name !== 'main_video' || track.kind !== 'video') return;
      watched = new StampedReceiver(track, options);
      resolve(watched);
    });
  });
  await client.connect();
  return {
    client,
    proxy,
    peer: () => peers.at(-1),
    video,
    close: async () => {
      watched?.stop();
      await client.disconnect().catch(() => undefined);
    },
  };
}
