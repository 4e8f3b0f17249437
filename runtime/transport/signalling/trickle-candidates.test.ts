/**
 * A candidate trickled after werift's ICE agent has nominated a pair, but before it reports
 * `connected`, waits for `connected` (issue 26): werift would check it first and start DTLS only
 * after, which cost 100–400 ms per connect. Before a nomination it goes in at once.
 */

import type { RTCPeerConnection } from 'werift';
import { describe, expect, it } from 'vitest';
import { addTrickledCandidates, nominationSettled } from './trickle-candidates.ts';

type State = 'new' | 'completed' | 'connected' | 'disconnected' | 'failed' | 'closed';

/** A peer with one ICE agent whose nomination and state the test moves, recording added candidates. */
function fakePeer(state: State, nominated: boolean) {
  const listeners = new Set<(state: State) => void>();
  const connection = {
    state,
    nominated: nominated ? {} : undefined,
    stateChanged: {
      subscribe(listener: (state: State) => void) {
        listeners.add(listener);
        return { unSubscribe: () => listeners.delete(listener) };
      },
    },
  };
  const added: string[] = [];
  const pc = {
    iceTransports: [{ connection }],
    addIceCandidate: async (candidate: { candidate: string }) => {
      added.push(candidate.candidate);
    },
  } as unknown as RTCPeerConnection;
  return {
    pc,
    added,
    listeners: () => listeners.size,
    moveTo(next: State) {
      connection.state = next;
      for (const listener of [...listeners]) listener(next);
    },
  };
}

const CANDIDATE = { candidate: 'candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host', sdp_mid: '0' };
const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('trickled candidates and the nomination', () => {
  it('before a nomination: added at once (one may be the only path)', async () => {
    const peer = fakePeer('completed', false);
    await addTrickledCandidates(peer.pc, [CANDIDATE], false);
    expect(peer.added).toEqual([CANDIDATE.candidate]);
  });

  it('after the nomination, while the agent still checks: held until it is connected, then added', async () => {
    const peer = fakePeer('completed', true); // werift's "completed" = its own gathering done, checks running
    let done = false;
    const adding = addTrickledCandidates(peer.pc, [CANDIDATE], true).then(() => (done = true));
    await flush();
    expect(done).toBe(false);
    expect(peer.added).toEqual([]);
    peer.moveTo('connected');
    await adding;
    expect(peer.added).toEqual([CANDIDATE.candidate, '']);
    expect(peer.listeners()).toBe(0);
  });

  it('a peer that fails or closes instead releases them too', async () => {
    for (const end of ['failed', 'closed'] as const) {
      const peer = fakePeer('new', true);
      const settled = nominationSettled(peer.pc);
      peer.moveTo(end);
      await settled;
      expect(peer.listeners()).toBe(0);
    }
  });

  it('once connected: added at once', async () => {
    const peer = fakePeer('connected', true);
    await addTrickledCandidates(peer.pc, [CANDIDATE], false);
    expect(peer.added).toEqual([CANDIDATE.candidate]);
  });
});
