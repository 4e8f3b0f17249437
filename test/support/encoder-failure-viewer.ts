/**
 * An H.264 viewer for the encoder-failure tests: a werift peer (test/support/werift-peer.ts) that
 * decodes what arrives, keeps each decoded frame's centre colour and whether it was a keyframe,
 * and sends the model's commands over the data channel as the 2.9.0 protocol does.
 */
import { decodeTrack, openWeriftPeer, type WeriftPeer } from './werift-peer.ts';

export interface DecodedFrame {
  readonly keyframe: boolean;
  readonly centre: { y: number; u: number; v: number };
  /** A caller's mark at the time of decoding (e.g. "the fault has fired"). */
  readonly mark: boolean;
}

export interface EncoderFailureViewer {
  readonly peer: WeriftPeer;
  readonly decoded: readonly DecodedFrame[];
  /** Sends a model command; resolves with the first reply or ack that names it, rejects on a failure. */
  command(type: string, data: Record<string, unknown>, timeoutMs?: number): Promise<string>;
  /** Closes the peer and ends its session. */
  close(): Promise<void>;
}

const H264_CB = 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f';

export async function openEncoderFailureViewer(runtimeUrl: string, mark: () => boolean = () => false): Promise<EncoderFailureViewer> {
  const peer = await openWeriftPeer(runtimeUrl, { videoMime: 'video/H264', videoParameters: H264_CB });
  const decoded: DecodedFrame[] = [];
  const decoding = await decodeTrack(peer, 'main_video', 'h264', (frame, unit) => {
    const { width, height, data } = frame;
    const luma = width * height;
    const c = (height / 4) * (width / 2) + width / 4;
    decoded.push({
      keyframe: unit.keyframe,
      centre: { y: data[(height / 2) * width + width / 2]!, u: data[luma + c]!, v: data[luma * 1.25 + c]! },
      mark: mark(),
    });
  });
  const messages: string[] = [];
  peer.channel.onMessage.subscribe((raw) => messages.push(String(raw)));
  let requests = 0;
  return {
    peer,
    decoded,
    async command(type, data, timeoutMs = 5_000) {
      const id = `c${++requests}`;
      peer.channel.send(JSON.stringify({ scope: 'application', data: { type, data, request_id: id } }));
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const reply = messages.find((m) => m.includes(`"${id}"`));
        if (reply) {
          if (reply.includes('"command_failed"')) throw new Error(`command ${type} failed: ${reply}`);
          return reply;
        }
        if (Date.now() > deadline) throw new Error(`no reply to command ${type} within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      decoding.close();
      await peer.close();
      // Ends the session at once, so the next test may start one (the runtime hosts one at a time).
      await fetch(`${runtimeUrl}/sessions/${peer.session.session_id}`, { method: 'DELETE' }).catch(() => {});
    },
  };
}
