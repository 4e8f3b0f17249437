/**
 * A minimal raw WebRTC client for robustness tests. It bypasses the client library so a test
 * can put anything on the data channel (broken JSON, wrong envelopes, oversized messages) and
 * read exactly what the runtime sends back.
 *
 * Signalling is the connection-addressed shape: GET the session (for its capabilities),
 * POST `.../connections`, POST the offer to `.../connections/{cid}/sdp_params`, poll GET for
 * the answer, then wait for the `data` channel to open.
 *
 * Uses @roamhq/wrtc, whose host candidates include loopback: bind the runtime to 127.0.0.1 and
 * pin its ICE to it (`ice: { hostAddresses: ['127.0.0.1'] }`). Close every peer before the
 * test file ends (wrtc's native threads misbehave at process exit otherwise).
 */

import wrtc from '@roamhq/wrtc';
import type { Capabilities, TrackCapability } from '../../protocol/capabilities.ts';
import type { Envelope } from '../../protocol/messages.ts';
import type { SessionResponse } from '../../protocol/session.ts';
import type { TrackMappingEntry } from '../../protocol/transport.ts';

const RTCPeerConnectionImpl = wrtc.RTCPeerConnection as unknown as typeof RTCPeerConnection;

export interface RawPeerOptions {
  /** Which model tracks get a transceiver (default: every track in the capabilities). */
  readonly tracks?: readonly string[];
  /** Send `track_mapping` with the offer (default true). */
  readonly sendTrackMapping?: boolean;
  /** Output tracks that start paused (`paused_tracks`). */
  readonly pausedTracks?: readonly string[];
  /** How long signalling plus ICE/DTLS/SCTP may take (default 30 s). */
  readonly connectTimeoutMs?: number;
  /**
   * Keep only 127.0.0.1 candidates in the offer, and refuse an answer advertising any other
   * address (default true): test traffic stays on loopback whatever the runtime's ICE policy.
   */
  readonly loopbackOnly?: boolean;
  /** The data channel's label (default `data`, as the client library and 2.9.0 name it). */
  readonly dataChannelLabel?: string;
}

export interface RawPeer {
  readonly sessionId: string;
  readonly connectionId: number;
  readonly capabilities: Capabilities;
  readonly pc: RTCPeerConnection;
  readonly channel: RTCDataChannel;
  /** Every envelope received, parsed, in arrival order. */
  readonly messages: Envelope[];
  /** Received texts that were not JSON (should stay empty: the runtime only sends envelopes). */
  readonly unparsed: string[];
  /** Sends a text message on the data channel exactly as given. */
  sendRaw(text: string): void;
  /**
   * Resolves with the first received envelope at index ≥ `from` (default 0) matching the
   * predicate, waiting for new ones until `timeoutMs` (default 10 s) has passed.
   */
  waitFor(predicate: (message: Envelope) => boolean, timeoutMs?: number, from?: number): Promise<Envelope>;
  close(): void;
}

/**
 * A wrtc offer for `tracks` with a data channel labelled `label` (default `data`), gathered
 * completely (no trickle ICE). `label: null` offers no data channel at all (and `channel` is then
 * a closed placeholder of no use).
 */
export interface WrtcOffer {
  readonly pc: RTCPeerConnection;
  readonly channel: RTCDataChannel;
  readonly sdp: string;
  readonly mapping: TrackMappingEntry[];
}

export async function createWrtcOffer(tracks: readonly TrackCapability[], label: string | null = 'data'): Promise<WrtcOffer> {
  const pc = new RTCPeerConnectionImpl({ iceServers: [] });
  try {
    const channel = label === null ? placeholderChannel() : pc.createDataChannel(label);
    const transceivers = tracks.map((track) => ({ track, transceiver: pc.addTransceiver(track.kind, { direction: track.direction }) }));
    await pc.setLocalDescription(await pc.createOffer());
    await waitUntil(() => pc.iceGatheringState === 'complete', 10_000, 'ICE gathering did not complete');
    const sdp = pc.localDescription?.sdp;
    if (!sdp) throw new Error('wrtc produced no local description');
    const mapping = transceivers.map(({ track, transceiver }) => {
      if (transceiver.mid == null) throw new Error(`transceiver for "${track.name}" has no mid`);
      return { mid: transceiver.mid, name: track.name, kind: track.kind, direction: track.direction };
    });
    return { pc, channel, sdp, mapping };
  } catch (error) {
    pc.close();
    throw error;
  }
}

export async function openRawPeer(runtimeUrl: string, sessionId: string, options: RawPeerOptions = {}): Promise<RawPeer> {
  const deadline = Date.now() + (options.connectTimeoutMs ?? 30_000);
  const base = runtimeUrl.replace(/\/+$/, '');
  const transport = `${base}/sessions/${encodeURIComponent(sessionId)}/transport/webrtc`;

  const session = await fetchJson<SessionResponse>('GET', `${base}/sessions/${encodeURIComponent(sessionId)}`, undefined, [200]);
  const capabilities = session.capabilities;
  const tracks =
    options.tracks === undefined
      ? capabilities.tracks
      : options.tracks.map((name) => {
          const track = capabilities.tracks.find((t) => t.name === name);
          if (!track) throw new Error(`openRawPeer: the model has no track "${name}"`);
          return track;
        });

  const { connection_id: connectionId } = await fetchJson<{ connection_id: number }>('POST', `${transport}/connections`, undefined, [201]);
  const offer = await createWrtcOffer(tracks, options.dataChannelLabel ?? 'data');
  const { pc, channel } = offer;
  const messages: Envelope[] = [];
  const unparsed: string[] = [];
  const listeners = new Set<() => void>();
  channel.onmessage = (event: MessageEvent) => {
    const text = typeof event.data === 'string' ? event.data : Buffer.from(event.data as ArrayBuffer).toString('utf8');
    try {
      messages.push(JSON.parse(text) as Envelope);
    } catch {
      unparsed.push(text);
    }
    for (const listener of [...listeners]) listener();
  };

  try {
    const loopbackOnly = options.loopbackOnly ?? true;
    await fetchJson(
      'POST',
      `${transport}/connections/${connectionId}/sdp_params`,
      {
        sdp_offer: loopbackOnly ? keepLoopbackCandidates(offer.sdp) : offer.sdp,
        ...(options.sendTrackMapping === false ? {} : { track_mapping: offer.mapping }),
        ...(options.pausedTracks ? { paused_tracks: options.pausedTracks } : {}),
      },
      [202],
    );
    let answer: string | undefined;
    while (answer === undefined) {
      const response = await fetch(`${transport}/connections/${connectionId}/sdp_params`);
      if (response.status === 200) {
        answer = ((await response.json()) as { sdp_answer: string }).sdp_answer;
      } else if (response.status === 202) {
        await response.arrayBuffer();
        if (Date.now() > deadline) throw new Error('openRawPeer: no SDP answer in time');
        await sleep(100);
      } else {
        throw new Error(`openRawPeer: GET sdp_params answered ${response.status}: ${await response.text()}`);
      }
    }
    if (loopbackOnly) {
      const foreign = candidateAddresses(answer).filter((address) => address !== '127.0.0.1');
      if (foreign.length > 0)
        throw new Error(`openRawPeer: the answer advertises non-loopback candidates ${foreign.join(', ')}; refusing to connect`);
    }
    await pc.setRemoteDescription({ type: 'answer', sdp: answer });
    await waitUntil(
      () => pc.connectionState === 'connected' && channel.readyState === 'open',
      Math.max(1_000, deadline - Date.now()),
      'the peer did not connect (connectionState/channel)',
      () => pc.connectionState === 'failed' || pc.connectionState === 'closed',
    );
  } catch (error) {
    channel.close();
    pc.close();
    throw error;
  }

  let closed = false;
  return {
    sessionId,
    connectionId,
    capabilities,
    pc,
    channel,
    messages,
    unparsed,
    sendRaw(text: string) {
      if (channel.readyState !== 'open') throw new Error(`openRawPeer: the data channel is ${channel.readyState}`);
      channel.send(text);
    },
    waitFor(predicate, timeoutMs = 10_000, from = 0) {
      return new Promise<Envelope>((resolve, reject) => {
        let checked = from;
        const check = (): boolean => {
          for (; checked < messages.length; checked++) {
            const message = messages[checked]!;
            if (predicate(message)) {
              finish();
              resolve(message);
              return true;
            }
          }
          return false;
        };
        const timer = setTimeout(() => {
          finish();
          reject(
            new Error(
              `openRawPeer.waitFor: no matching message within ${timeoutMs} ms; received: ${JSON.stringify(messages.slice(from)).slice(0, 2_000)}`,
            ),
          );
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          listeners.delete(listener);
        };
        const listener = () => void check();
        listeners.add(listener);
        check();
      });
    },
    close() {
      if (closed) return;
      closed = true;
      listeners.clear();
      try {
        channel.close();
      } catch {
        // already closed
      }
      pc.close();
    },
  };
}

/** The connection addresses of an SDP's `a=candidate` lines. */
export function candidateAddresses(sdp: string): string[] {
  return sdp
    .split(/\r?\n/)
    .filter((line) => line.startsWith('a=candidate:'))
    .map((line) => line.split(' ')[4] ?? '');
}

/** Drops every `a=candidate` line whose address is not 127.0.0.1. */
export function keepLoopbackCandidates(sdp: string): string {
  return sdp
    .split('\r\n')
    .filter((line) => !line.startsWith('a=candidate:') || line.split(' ')[4] === '127.0.0.1')
    .join('\r\n');
}

async function fetchJson<T = unknown>(method: string, url: string, body: unknown, expected: number[]): Promise<T> {
  const response = await fetch(url, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!expected.includes(response.status)) {
    throw new Error(`openRawPeer: ${method} ${url} answered ${response.status} (expected ${expected.join('/')}): ${text}`);
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

/** For an offer with no data channel: a channel of a throwaway peer, closed at once. */
function placeholderChannel(): RTCDataChannel {
  const throwaway = new RTCPeerConnectionImpl({ iceServers: [] });
  const channel = throwaway.createDataChannel('none');
  throwaway.close();
  return channel;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitUntil(condition: () => boolean, timeoutMs: number, what: string, failed?: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (failed?.()) throw new Error(`openRawPeer: ${what} (failed)`);
    if (Date.now() > deadline) throw new Error(`openRawPeer: ${what} within ${timeoutMs} ms`);
    await sleep(25);
  }
}
