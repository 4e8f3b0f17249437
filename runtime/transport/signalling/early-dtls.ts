/**
 * Keeps the DTLS records a client sends before werift's DTLS transport has started, and hands
 * them to it when it starts.
 *
 * As the DTLS server (answer-offer.ts) the runtime waits for the client's ClientHello, which
 * libwebrtc sends the moment its side of ICE is writable. werift creates its DTLS server only when
 * its own ICE agent reports `connected` — after its check loop ends, up to 20 ms after the
 * nomination, later while it still has pairs to check — and drops what arrived before. The client
 * then resends on its back-off timer (50 ms, then 100 ms, …): 30–100 ms of every connect was that
 * wait (docs/performance.md, "Time to ready"). Records kept here are exactly those no DTLS
 * endpoint of this peer has seen, so nothing is delivered twice.
 */

import type { RTCPeerConnection } from 'werift';

/** More than a handshake's first flight needs; a peer flooding before DTLS starts gets no more kept. */
const MAX_KEPT = 16;

/** DTLS records (RFC 7983's demultiplexing: first byte 20–63). */
function isDtlsRecord(buf: Buffer): boolean {
  const first = buf[0] ?? 0;
  return first > 19 && first < 64;
}

/** Call once the peer's transports exist (after the remote offer is applied), before the answer goes out. */
export function keepEarlyDtlsRecords(pc: RTCPeerConnection): void {
  for (const transport of pc.dtlsTransports) {
    if (transport.state !== 'new') continue;
    const connection = transport.iceTransport.connection;
    const kept: Buffer[] = [];
    const receiving = connection.onData.subscribe((buf) => {
      if (kept.length < MAX_KEPT && isDtlsRecord(buf)) kept.push(Buffer.from(buf));
    });
    const watching = transport.onStateChange.subscribe((state) => {
      if (state === 'new') return;
      receiving.unSubscribe();
      watching.unSubscribe();
      if (state !== 'connecting' || kept.length === 0) return;
      // `connecting` is set just before werift builds its DTLS endpoint, in the same turn: hand
      // the records over once it listens.
      queueMicrotask(() => {
        for (const record of kept.splice(0)) connection.onData.execute(record);
      });
    });
  }
}
