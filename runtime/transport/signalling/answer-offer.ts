/**
 * Answers a client's SDP offer on a fresh runtime peer: maps each offered m-line (by mid) to a
 * model track, sets the runtime's direction for it, and returns the complete answer (every
 * runtime candidate is in it; the client may trickle its own later, see trickle-candidates.ts).
 */

import type { RTCPeerConnection, RTCRtpTransceiver } from 'werift';
import { ArclightError } from '../../../protocol/errors.ts';
import { DATA_CHANNEL_LABEL } from '../../../protocol/messages.ts';
import type { TrackCapability } from '../../../protocol/capabilities.ts';
import type { TrackMappingEntry } from '../../../protocol/transport.ts';
import type { IcePolicy } from './ice-policy.ts';
import type { H264Profile } from '../../media/video-encoder.ts';
import type { VideoCodec } from '../../media/video-encoder.ts';
import { keepEarlyDtlsRecords } from './early-dtls.ts';
import { withoutImplicitStun } from './no-implicit-stun.ts';
import { withoutInactiveSsrcs } from './inactive-sections.ts';
import { withFlexfec, type SendingSection } from './flexfec-negotiation.ts';

export interface TrackBinding {
  readonly transceiver: RTCRtpTransceiver;
  readonly track: TrackCapability;
}

/** How long ICE gathering may take before the answer goes out with what it has. */
const GATHER_TIMEOUT_MS = 5_000;

/**
 * Refuses text that is not even shaped like an SDP offer (checked before any peer is touched), and
 * an offer with no data channel: commands, replies and session events travel on it, and without
 * one ICE and DTLS would connect and then nothing would ever happen. (A channel's label is not in
 * the SDP; whatever the client labels it, the runtime serves on it: Connection#attachChannel.)
 */
export function assertSdpOfferShape(offerSdp: string): void {
  if (!/^v=0\r?\n/.test(offerSdp) || !offerSdp.includes('\nm=')) {
    throw new ArclightError('invalid_sdp', 'sdp_offer is not an SDP offer (it must start with "v=0" and contain m= lines).');
  }
  if (!/\nm=application /.test(offerSdp)) {
    throw new ArclightError(
      'invalid_sdp',
      `The offer has no data channel (no m=application section): create one before the offer (the client library labels it "${DATA_CHANNEL_LABEL}"); commands and messages travel on it.`,
    );
  }
}

export async function answerOffer(
  pc: RTCPeerConnection,
  offerSdp: string,
  tracks: readonly TrackCapability[],
  mapping: readonly TrackMappingEntry[] | undefined,
  icePolicy: IcePolicy,
  videoCodecs: readonly VideoCodec[] = DEFAULT_VIDEO_CODECS,
  /** Called once the offer is applied: from then on trickled candidates can go to `pc`. */
  onOfferApplied: () => void = () => {},
): Promise<{ answerSdp: string; bindings: TrackBinding[] }> {
  assertSdpOfferShape(offerSdp);
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
  } catch (error) {
    throw new ArclightError('invalid_sdp', `The SDP offer could not be applied: ${(error as Error).message}`, { cause: error });
  }
  onOfferApplied();
  withoutImplicitStun(pc);
  keepEarlyDtlsRecords(pc);
  const bindings = bindTracks(pc.getTransceivers(), tracks, mapping);
  for (const binding of bindings) orientTransceiver(binding, videoCodecs);
  await setAnswer(pc, bindings, dtlsServerWherePossible(offerSdp));
  await waitForGathering(pc);
  const sdp = pc.localDescription?.sdp;
  if (!sdp) throw new ArclightError('internal_error', 'The runtime produced no local description.');
  return { answerSdp: withFlexfec(withoutInactiveSsrcs(icePolicy.advertisedSdp(sdp)), offerSdp, sendingVideo(bindings)), bindings };
}

/** The bound transceivers that send the model's video, as FlexFEC's answer rewrite names them. */
export function sendingVideo(bindings: readonly TrackBinding[]): SendingSection[] {
  return bindings
    .filter((b) => b.track.kind === 'video' && b.track.direction === 'recvonly')
    .map((b) => ({ transceiver: b.transceiver, mid: b.transceiver.mid ?? undefined }));
}

/** The runtime's direction for a track: the mirror image of the client's. */
export function runtimeDirection(track: TrackCapability): 'sendonly' | 'recvonly' {
  return track.direction === 'recvonly' ? 'sendonly' : 'recvonly';
}

/** Points a bound transceiver the runtime's way, and an output video one at our codec preference. */
export function orientTransceiver({ transceiver, track }: TrackBinding, videoCodecs: readonly VideoCodec[]): void {
  transceiver.setDirection(runtimeDirection(track));
  if (track.direction === 'recvonly' && track.kind === 'video') preferCodecs(transceiver, videoCodecs);
}

/**
 * Answers the applied offer: every transceiver not in `bindings` inactive, then the answer
 * created (rewritten by `rewrite`, if given) and set locally; werift's refusal is the client's
 * offer's fault (`invalid_sdp`).
 */
export async function setAnswer(
  pc: RTCPeerConnection,
  bindings: readonly TrackBinding[],
  rewrite?: (answerSdp: string) => string,
): Promise<void> {
  const bound = new Set(bindings.map((b) => b.transceiver));
  for (const transceiver of pc.getTransceivers()) {
    if (!bound.has(transceiver)) transceiver.setDirection('inactive');
  }
  try {
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(rewrite ? { type: 'answer', sdp: rewrite(answer.sdp) } : answer);
  } catch (error) {
    throw new ArclightError('invalid_sdp', `No answer could be negotiated for this offer: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The answer rewrite that makes a fresh runtime peer the DTLS server (`a=setup:passive`) where
 * the offer lets the answerer choose (`actpass`, which every browser and libwebrtc offers).
 *
 * Why: werift answers `a=setup:active` by default, and as a DTLS client it waits a fixed 100 ms
 * after ICE connects before sending its ClientHello (werift 0.24 `RTCDtlsTransport.start`). As
 * the server it answers the client's ClientHello, which libwebrtc sends the moment ICE is
 * writable — connect → ready is ~100 ms shorter (docs/performance.md, "Time to ready"). Passive is
 * a role the answer may take (RFC 8829 §5.3.1: "active" or "passive"; "active" is only a SHOULD),
 * and libwebrtc, Chromium, Safari and Firefox all accept it. An offer that already names a role
 * (`a=setup:active` → werift answers passive by itself; `a=setup:passive` → the answer must be
 * active) is left alone. Only for a fresh peer: an answer in place keeps the role its transport
 * has (werift writes it), as a renegotiation must.
 */
export function dtlsServerWherePossible(offerSdp: string): ((answerSdp: string) => string) | undefined {
  if (/^a=setup:(?!actpass)/m.test(offerSdp)) return undefined;
  return (answerSdp) => answerSdp.replace(/^a=setup:active(?=\r?$)/gm, 'a=setup:passive');
}

/**
 * The model track a `track_mapping` entry names, checked: it exists, with the entry's kind and
 * direction, and no earlier entry (recorded in `seen`) named it.
 */
export function mappedTrack(entry: TrackMappingEntry, byName: ReadonlyMap<string, TrackCapability>, seen: Set<string>): TrackCapability {
  const track = byName.get(entry.name);
  if (!track) {
    throw new ArclightError(
      'unknown_track',
      `track_mapping names "${entry.name}", which the model does not have. Tracks: ${[...byName.keys()].join(', ')}.`,
    );
  }
  if (track.kind !== entry.kind || track.direction !== entry.direction) {
    throw new ArclightError(
      'invalid_request',
      `track_mapping says "${entry.name}" is ${entry.kind}/${entry.direction}; the model declares ${track.kind}/${track.direction}.`,
    );
  }
  if (seen.has(entry.name)) throw new ArclightError('invalid_request', `track_mapping names "${entry.name}" twice.`);
  seen.add(entry.name);
  return track;
}

function bindTracks(
  transceivers: readonly RTCRtpTransceiver[],
  tracks: readonly TrackCapability[],
  mapping: readonly TrackMappingEntry[] | undefined,
): TrackBinding[] {
  const byName = new Map(tracks.map((t) => [t.name, t]));
  if (mapping && mapping.length > 0) {
    const seen = new Set<string>();
    return mapping.map((entry) => {
      const track = mappedTrack(entry, byName, seen);
      const transceiver = transceivers.find((t) => t.mid === entry.mid);
      if (!transceiver)
        throw new ArclightError('invalid_request', `track_mapping names mid "${entry.mid}", which the offer does not have.`);
      if (transceiver.kind !== entry.kind) {
        throw new ArclightError(
          'invalid_request',
          `mid "${entry.mid}" is ${transceiver.kind} in the offer but ${entry.kind} in track_mapping.`,
        );
      }
      return { transceiver, track };
    });
  }
  // No mapping (a plain WebRTC client): pair m-lines with tracks in declaration order by kind and
  // direction, the order 2.9.0 adds transceivers in.
  const free = [...tracks];
  const bindings: TrackBinding[] = [];
  for (const transceiver of transceivers) {
    // werift's offerDirection is the offer's direction reversed — the runtime's side: a client's
    // `recvonly` (it wants our output) reads `sendonly`.
    const wantsOutput = transceiver.offerDirection === 'sendonly' || transceiver.offerDirection === 'sendrecv';
    const index = free.findIndex((t) => t.kind === transceiver.kind && (t.direction === 'recvonly') === wantsOutput);
    if (index < 0) continue;
    bindings.push({ transceiver, track: free[index]! });
    free.splice(index, 1);
  }
  return bindings;
}

export const DEFAULT_VIDEO_CODECS: readonly VideoCodec[] = ['h264', 'vp8'];

/**
 * werift answers in the offer's codec order, and Chromium offers VP8 first; the runtime sends
 * each client the first codec of its own preference that the client offers (by default H.264:
 * cheaper to encode and decode, hardware decode on every browser). Among H.264 variants:
 * packetization-mode 1 (we fragment with FU-A) and constrained baseline (what x264 produces)
 * first, High (sent as High, see negotiatedH264Profile) last; mode 0 cannot carry our packets. Codecs the runtime cannot encode go last.
 */
export function preferCodecs(transceiver: RTCRtpTransceiver, preference: readonly VideoCodec[]): void {
  const rank = (codec: { mimeType: string; parameters?: string }): number => {
    const name = codec.mimeType.toLowerCase().split('/')[1] as VideoCodec;
    const index = preference.indexOf(name);
    if (index < 0) return 1_000;
    const params = codec.parameters ?? '';
    let within = 0;
    if (name === 'h264') {
      if (!/packetization-mode=1/.test(params)) return 1_000;
      within = /profile-level-id=42e0/i.test(params) ? 0 : /profile-level-id=4200/i.test(params) ? 1 : 2;
    }
    return index * 10 + within;
  };
  const codecs = [...transceiver.codecs];
  if (!codecs.some((c) => rank(c) < 1_000)) return;
  transceiver.codecs = codecs.sort((a, b) => rank(a) - rank(b));
  // werift chose the sender's codec when it applied the offer; make it the answer's first.
  transceiver.sender.codec = transceiver.codecs[0];
}

/**
 * The H.264 profile to send on a negotiated transceiver: High when the codec the client accepted
 * says profile_idc 100 (a `profile-level-id` starting `64`, offered alone by some hardware-decoder
 * clients); otherwise Constrained Baseline, which Baseline, Main and High decoders all read.
 */
export function negotiatedH264Profile(transceiver: RTCRtpTransceiver): H264Profile {
  const params = transceiver.sender.codec?.parameters ?? '';
  return /profile-level-id=64/i.test(params) ? 'high' : 'constrained-baseline';
}

async function waitForGathering(pc: RTCPeerConnection): Promise<void> {
  if (pc.iceGatheringState === 'complete') return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      unsubscribe();
      resolve();
    }, GATHER_TIMEOUT_MS);
    const { unSubscribe: unsubscribe } = pc.iceGatheringStateChange.subscribe((state) => {
      if (state !== 'complete') return;
      clearTimeout(timer);
      unsubscribe();
      resolve();
    });
  });
}
