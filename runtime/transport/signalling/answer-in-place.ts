/**
 * Answers a renegotiation offer from the connection's current client peer on the current runtime
 * peer (see offer-origin.ts for how that is told): same ICE credentials and DTLS certificate, so
 * the client can apply the answer to the peer it already has, and every transceiver the offer
 * keeps goes on carrying media. It reports which track bindings the offer adds and which it
 * ends, so the session attaches and detaches only those.
 *
 * Everything that can be refused is refused before the live peer is touched: the SDP's shape,
 * m-lines of the current description missing or changed (RFC 8829 §5.2: a renegotiation may
 * add m-lines and disable them with port 0, never remove or reorder them), `track_mapping`
 * errors, and whatever werift itself cannot apply (tried first on a scratch peer).
 */

import {
  SessionDescription,
  type MediaDescription,
  type RTCRtpCodecParameters,
  type RTCPeerConnection,
  type RTCRtpTransceiver,
} from 'werift';
import { ArclightError } from '../../../protocol/errors.ts';
import type { TrackCapability } from '../../../protocol/capabilities.ts';
import type { TrackMappingEntry } from '../../../protocol/transport.ts';
import {
  assertSdpOfferShape,
  DEFAULT_VIDEO_CODECS,
  mappedTrack,
  orientTransceiver,
  runtimeDirection,
  sendingVideo,
  setAnswer,
  type TrackBinding,
} from './answer-offer.ts';
import { createRuntimePeer, type PeerFactoryOptions } from './peer-factory.ts';
import { withoutImplicitStun } from './no-implicit-stun.ts';
import { withoutInactiveSsrcs } from './inactive-sections.ts';
import { withFlexfec } from './flexfec-negotiation.ts';

export interface InPlaceAnswer {
  readonly answerSdp: string;
  /** Every track binding of the peer once this offer is applied. */
  readonly bindings: readonly TrackBinding[];
  /** Bindings this offer adds (to attach). */
  readonly attached: readonly TrackBinding[];
  /** Bindings of the previous offer this one ends or changes (to detach, before attaching). */
  readonly detached: readonly TrackBinding[];
}

export interface InPlaceOffer {
  readonly offerSdp: string;
  /** The offer the peer answered last (its m-lines must all be in `offerSdp`, in order). */
  readonly currentOfferSdp: string;
  /** The peer's track bindings now. */
  readonly current: readonly TrackBinding[];
  readonly tracks: readonly TrackCapability[];
  readonly mapping: readonly TrackMappingEntry[] | undefined;
  readonly peerOptions: PeerFactoryOptions;
  /** Called once the offer is applied: from then on trickled candidates go to the peer. */
  readonly onOfferApplied?: () => void;
}

/** One m-line of the offer that carries a model track in a direction the m-line allows. */
interface PlannedBinding {
  readonly mid: string;
  readonly track: TrackCapability;
}

export async function answerInPlace(pc: RTCPeerConnection, request: InPlaceOffer): Promise<InPlaceAnswer> {
  const { offerSdp, current } = request;
  assertSdpOfferShape(offerSdp);
  const offered = parseOffer(offerSdp);
  assertKeepsMLines(parseOffer(request.currentOfferSdp).media, offered.media);
  const plan = planBindings(offered.media, request.tracks, request.mapping, current);
  await assertWeriftApplies(offerSdp, request.peerOptions);

  const planKey = (mid: string, track: string) => `${mid}\n${track}`;
  const planned = new Set(plan.map((p) => planKey(p.mid, p.track.name)));
  const kept = current.filter((b) => b.transceiver.mid !== null && planned.has(planKey(b.transceiver.mid, b.track.name)));
  const detached = current.filter((b) => !kept.includes(b));
  // werift renegotiates each kept m-line's codecs in the offer's order, which would switch a
  // running sender to the offer's first codec: remember what each one sends to put it back.
  const sending = new Map(kept.filter((b) => b.track.direction === 'recvonly').map((b) => [b.transceiver, b.transceiver.sender.codec]));
  // Directions are set before the offer is applied: werift only routes a remote m-line's RTP
  // to a transceiver whose direction receives when it applies the offer.
  const previousDirections = new Map(pc.getTransceivers().map((t) => [t, t.direction]));
  for (const { mid, track } of plan) {
    pc.getTransceivers()
      .find((t) => t.mid === mid)
      ?.setDirection(runtimeDirection(track));
  }
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
  } catch (error) {
    for (const [transceiver, direction] of previousDirections) transceiver.setDirection(direction);
    for (const [transceiver, codec] of sending) restoreSendingCodec(transceiver, codec);
    throw new ArclightError('invalid_sdp', `The SDP offer could not be applied: ${(error as Error).message}`, { cause: error });
  }
  request.onOfferApplied?.();
  withoutImplicitStun(pc); // an ICE restart gathers again

  const videoCodecs = request.peerOptions.videoCodecs ?? DEFAULT_VIDEO_CODECS;
  const attached: TrackBinding[] = [];
  const keptAfter: TrackBinding[] = [];
  for (const binding of kept) {
    if (!sending.has(binding.transceiver) || restoreSendingCodec(binding.transceiver, sending.get(binding.transceiver))) {
      keptAfter.push(binding);
    } else {
      // The codec it was sending is no longer offered: its sink starts over with the new one.
      detached.push(binding);
      attached.push(binding);
    }
  }
  const keptKeys = new Set(keptAfter.map((b) => planKey(b.transceiver.mid ?? '', b.track.name)));
  for (const { mid, track } of plan) {
    if (keptKeys.has(planKey(mid, track.name))) continue;
    const transceiver = pc.getTransceivers().find((t) => t.mid === mid);
    if (!transceiver)
      throw new ArclightError('internal_error', `The runtime peer has no transceiver for mid "${mid}" after applying the offer.`);
    if (attached.some((b) => b.transceiver === transceiver)) continue;
    attached.push({ transceiver, track });
  }
  for (const binding of attached) orientTransceiver(binding, videoCodecs);
  const bindings = [...keptAfter, ...attached];
  await setAnswer(pc, bindings);
  const sdp = pc.localDescription?.sdp;
  if (!sdp) throw new ArclightError('internal_error', 'The runtime produced no local description.');
  const answerSdp = withFlexfec(
    withoutInactiveSsrcs(request.peerOptions.icePolicy.advertisedSdp(sdp)),
    request.offerSdp,
    sendingVideo(bindings),
  );
  return { answerSdp, bindings, attached, detached };
}

function parseOffer(sdp: string): SessionDescription {
  try {
    return SessionDescription.parse(sdp);
  } catch (error) {
    throw new ArclightError('invalid_sdp', `The SDP offer could not be parsed: ${(error as Error).message}`, { cause: error });
  }
}

function assertKeepsMLines(before: readonly MediaDescription[], after: readonly MediaDescription[]): void {
  before.forEach((media, index) => {
    const next = after[index];
    const mid = media.rtp.muxId;
    if (!next || next.kind !== media.kind || next.rtp.muxId !== mid) {
      throw new ArclightError(
        'invalid_sdp',
        `A renegotiation offer keeps every m-line of the current one, in order: m-line ${index} (${media.kind}, mid "${mid}") is ${next ? `now ${next.kind}, mid "${next.rtp.muxId}"` : 'missing'}. Disable an m-line with port 0 instead.`,
      );
    }
  });
}

/** What the client does on an m-line: a port of 0 rejects it, whatever its direction says. */
function clientFlow(media: MediaDescription): { sends: boolean; receives: boolean } {
  const direction = media.port === 0 ? 'inactive' : (media.direction ?? 'sendrecv');
  return { sends: direction === 'sendonly' || direction === 'sendrecv', receives: direction === 'recvonly' || direction === 'sendrecv' };
}

/** True when the m-line carries the track's media the way the track flows. */
function carries(media: MediaDescription, track: TrackCapability): boolean {
  const flow = clientFlow(media);
  return track.direction === 'recvonly' ? flow.receives : flow.sends;
}

/**
 * Which model track each offered m-line carries. With `track_mapping` the mapping says it (as
 * for a first offer; m-lines it does not name keep their tracks); without, an m-line already
 * bound keeps its track and a new one takes the first free track of its kind and flow, in
 * declaration order. An m-line that no longer carries its track's flow (inactive, port 0, or
 * turned around) carries nothing.
 */
function planBindings(
  media: readonly MediaDescription[],
  tracks: readonly TrackCapability[],
  mapping: readonly TrackMappingEntry[] | undefined,
  current: readonly TrackBinding[],
): PlannedBinding[] {
  const byMid = new Map(
    media.filter((m) => m.kind === 'audio' || m.kind === 'video').flatMap((m) => (m.rtp.muxId ? [[m.rtp.muxId, m] as const] : [])),
  );
  if (mapping && mapping.length > 0) {
    const byName = new Map(tracks.map((t) => [t.name, t]));
    const seen = new Set<string>();
    const plan: PlannedBinding[] = [];
    for (const entry of mapping) {
      const track = mappedTrack(entry, byName, seen);
      const line = byMid.get(entry.mid);
      if (!line) throw new ArclightError('invalid_request', `track_mapping names mid "${entry.mid}", which the offer does not have.`);
      if (line.kind !== entry.kind)
        throw new ArclightError('invalid_request', `mid "${entry.mid}" is ${line.kind} in the offer but ${entry.kind} in track_mapping.`);
      if (carries(line, track)) plan.push({ mid: entry.mid, track });
    }
    // A mapping that names only the m-lines it adds leaves the others with their tracks.
    const namedMids = new Set(mapping.map((entry) => entry.mid));
    for (const binding of current) {
      const mid = binding.transceiver.mid;
      if (mid === null || namedMids.has(mid) || seen.has(binding.track.name)) continue;
      const line = byMid.get(mid);
      if (line && carries(line, binding.track)) plan.push({ mid, track: binding.track });
    }
    return plan;
  }
  const plan: PlannedBinding[] = [];
  const taken = new Set<string>();
  const boundMids = new Set<string>();
  for (const binding of current) {
    const mid = binding.transceiver.mid;
    if (mid === null) continue;
    boundMids.add(mid);
    const line = byMid.get(mid);
    if (line && carries(line, binding.track)) {
      plan.push({ mid, track: binding.track });
      taken.add(binding.track.name);
    }
  }
  for (const [mid, line] of byMid) {
    if (boundMids.has(mid)) continue;
    const flow = clientFlow(line);
    const track = tracks.find(
      (t) => !taken.has(t.name) && t.kind === line.kind && (t.direction === 'recvonly' ? flow.receives : flow.sends),
    );
    if (!track) continue;
    plan.push({ mid, track });
    taken.add(track.name);
  }
  return plan;
}

/** Applies the offer to a scratch runtime peer first, so one werift refuses half-way leaves the live peer as it was. */
async function assertWeriftApplies(offerSdp: string, options: PeerFactoryOptions): Promise<void> {
  const scratch = createRuntimePeer(options);
  try {
    await scratch.setRemoteDescription({ type: 'offer', sdp: offerSdp });
  } catch (error) {
    throw new ArclightError('invalid_sdp', `The SDP offer could not be applied: ${(error as Error).message}`, { cause: error });
  } finally {
    scratch.close().catch(() => {});
  }
}

/** Puts the codec a transceiver was sending first again; false when the offer no longer has it. */
function restoreSendingCodec(transceiver: RTCRtpTransceiver, codec: RTCRtpCodecParameters | undefined): boolean {
  if (!codec) return true;
  const same = transceiver.codecs.find(
    (c) => c.payloadType === codec.payloadType && c.mimeType.toLowerCase() === codec.mimeType.toLowerCase(),
  );
  if (!same) return false;
  transceiver.codecs = [same, ...transceiver.codecs.filter((c) => c !== same)];
  transceiver.sender.codec = same;
  return true;
}
