/**
 * The aiortc reference sender (Debian python3-aiortc, VP8 from libvpx with aiortc's own REMB-driven
 * bitrate) to a wrtc receiver through the lab. aiortc runs inside the test's network namespace
 * (its ICE binds every non-loopback address it finds; there, the only one is the namespace's),
 * so the lab's server side is the namespace's host address. Signalling over the child's stdin and
 * stdout (aiortc_sender.py); the receiver offers.
 */

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import wrtc from '@roamhq/wrtc';
import type { TestNetwork } from '../netns.ts';
import type { NetworkLab } from './network-lab.ts';
import { StampedReceiver } from './stamped-receiver.ts';

/** Debian's interpreter, where python3-aiortc installs (a pyenv or venv python on PATH would not have it). */
export const AIORTC_PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('./aiortc_sender.py', import.meta.url));

/** Why the aiortc reference cannot run here, or null. */
export function aiortcUnavailableReason(): string | null {
  try {
    accessSync('/usr/lib/python3/dist-packages/aiortc/__init__.py', fsConstants.R_OK);
    return null;
  } catch {
    return 'python3-aiortc is not installed (Debian package python3-aiortc; `npm test` installs it through scripts/provision.mjs when run as root on Debian)';
  }
}

export interface AiortcReferenceOptions {
  readonly width: number;
  readonly height: number;
  readonly fps: number;
  /** `grain`: fresh luma noise every frame (default `pattern`: scrolling bars). */
  readonly picture?: 'pattern' | 'grain';
}

export interface AiortcReference {
  readonly receiver: RTCPeerConnection;
  readonly video: StampedReceiver;
  /** Frame id (16 bits) → epoch ms aiortc handed the frame to its encoder. */
  readonly emitTimes: Map<number, number>;
  framesSent(): number;
  /** What the child wrote to stderr (for failure messages). */
  stderr(): string;
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

export async function startAiortcReference(lab: NetworkLab, net: TestNetwork, options: AiortcReferenceOptions): Promise<AiortcReference> {
  const reason = aiortcUnavailableReason();
  if (reason) throw new Error(`the aiortc reference cannot run: ${reason}`);
  const [file, ...args] = net.wrap([
    AIORTC_PYTHON,
    SCRIPT,
    '--width',
    String(options.width),
    '--height',
    String(options.height),
    '--fps',
    String(options.fps),
    '--picture',
    options.picture ?? 'pattern',
  ]);
  const child: ChildProcessWithoutNullStreams = spawn(file!, args, { stdio: 'pipe' });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const emitTimes = new Map<number, number>();
  let sent = 0;
  let answered: ((sdp: string) => void) | undefined;
  const answer = new Promise<string>((resolve, reject) => {
    answered = resolve;
    child.once('exit', (code) => reject(new Error(`aiortc exited (${code}) before answering: ${stderr}`)));
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const message = JSON.parse(line) as { type?: string; sdp?: string; emit?: number; t?: number };
    if (message.emit !== undefined && message.t !== undefined) {
      emitTimes.set(message.emit, message.t);
      sent++;
    } else if (message.type === 'answer' && message.sdp) answered?.(message.sdp);
  });

  const receiver = new (wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection)({ iceServers: [] });
  receiver.addTransceiver('video', { direction: 'recvonly' });
  const stamp = {
    x: 2 * Math.round((40 * options.width) / 1280 / 2),
    y: 2 * Math.round((280 * options.height) / 720 / 2),
    width: options.width,
  };
  const video = new Promise<StampedReceiver>((resolve) =>
    receiver.addEventListener('track', (event) => resolve(new StampedReceiver(event.track, { stamp }))),
  );
  await receiver.setLocalDescription(await receiver.createOffer());
  await gathered(receiver);
  child.stdin.write(`${JSON.stringify({ type: 'offer', sdp: await lab.rewriteClientSdp(receiver.localDescription!.sdp) })}\n`);
  const sdp = await Promise.race([
    answer,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer from aiortc in 20 s: ${stderr}`)), 20_000).unref()),
  ]);
  await receiver.setRemoteDescription({ type: 'answer', sdp: await lab.rewriteServerSdp(sdp) });
  const watched = await video;
  return {
    receiver,
    video: watched,
    emitTimes,
    framesSent: () => sent,
    stderr: () => stderr,
    close: async () => {
      watched.stop();
      receiver.close();
      child.stdin.end();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      if (child.exitCode === null && child.signalCode === null) await exited;
      clearTimeout(timer);
    },
  };
}
