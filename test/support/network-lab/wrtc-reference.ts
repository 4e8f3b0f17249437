/**
 * The libwebrtc reference sender: @roamhq/wrtc's own encoder (VP8), pacer and congestion control
 * (GoogCC with transport-wide feedback, as a browser sends) fed the same picture our benches
 * encode (`PictureDrawer`, with the frame stamp), to a wrtc receiver, through the lab. The sender
 * stands on the server side of the lab, the receiver on the client side; signalling is in
 * process (offer from the sender, no trickle: each side's SDP carries all its candidates).
 */

import wrtc from '@roamhq/wrtc';
import { PictureDrawer, type Picture } from '../../../bench/support/pictures.ts';
import type { NetworkLab } from './network-lab.ts';
import { epochNow, StampedReceiver } from './stamped-receiver.ts';

export interface WrtcReferenceOptions {
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  readonly picture?: Picture;
}

export interface WrtcReference {
  readonly sender: RTCPeerConnection;
  readonly receiver: RTCPeerConnection;
  readonly video: StampedReceiver;
  /** Frame id (16 bits) → epoch ms the frame went to the source. */
  readonly emitTimes: Map<number, number>;
  /** Frames handed to the source so far. */
  readonly framesSent: () => number;
  close(): Promise<void>;
}

function gathered(pc: RTCPeerConnection): Promise<void> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') resolve();
    });
  });
}

export async function startWrtcReference(lab: NetworkLab, options: WrtcReferenceOptions): Promise<WrtcReference> {
  const RTCPeerConnectionImpl = wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection;
  const sender = new RTCPeerConnectionImpl({ iceServers: [] });
  const receiver = new RTCPeerConnectionImpl({ iceServers: [] });
  const source = new wrtc.nonstandard.RTCVideoSource();
  const track = source.createTrack() as unknown as MediaStreamTrack;
  sender.addTransceiver(track, { direction: 'sendonly' });
  const drawer = new PictureDrawer(options.width, options.height, options.picture ?? 'pattern');
  const emitTimes = new Map<number, number>();
  let frame = 0;
  const feeder = setInterval(() => {
    const data = drawer.draw(frame);
    emitTimes.set(frame & 0xffff, epochNow());
    source.onFrame({ width: options.width, height: options.height, data });
    frame++;
  }, 1000 / options.fps);

  const video = new Promise<StampedReceiver>((resolve) => {
    receiver.addEventListener('track', (event) =>
      resolve(new StampedReceiver(event.track, { stamp: { ...drawer.stamp, width: options.width } })),
    );
  });
  await sender.setLocalDescription(await sender.createOffer());
  await gathered(sender);
  await receiver.setRemoteDescription({ type: 'offer', sdp: await lab.rewriteServerSdp(sender.localDescription!.sdp) });
  await receiver.setLocalDescription(await receiver.createAnswer());
  await gathered(receiver);
  await sender.setRemoteDescription({ type: 'answer', sdp: await lab.rewriteClientSdp(receiver.localDescription!.sdp) });
  const stamped = await video;
  return {
    sender,
    receiver,
    video: stamped,
    emitTimes,
    framesSent: () => frame,
    close: async () => {
      clearInterval(feeder);
      stamped.stop();
      track.stop();
      sender.close();
      receiver.close();
    },
  };
}
