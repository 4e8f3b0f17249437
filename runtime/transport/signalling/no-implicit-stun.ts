/**
 * werift's ICE agent asks `stun.l.google.com:19302` for a server-reflexive candidate whenever no
 * STUN server is configured, and gathering — so the runtime's answer — waits for it: nothing where
 * DNS fails, up to werift's 5 s timeout where DNS resolves and outbound UDP is blocked (a locked-down
 * GPU host). A runtime must not reach out to a third party nobody configured, on every answer and in
 * every test: without a STUN URL among the runtime's own ICE servers, its agents get none.
 *
 * A runtime behind NAT advertises its public address (`--public-ip`, ice-policy.ts) or lists a STUN
 * server among its ICE servers (`RuntimeOptions.ice.servers`), which its own peers then use.
 */

import type { RTCPeerConnection } from 'werift';

/** Whether `urls` (one ICE server's) names a STUN server. */
function isStun(urls: string | readonly string[] | undefined): boolean {
  return [urls ?? []].flat().some((url) => /^stuns?:/i.test(url));
}

/** Call after the remote description is applied (the ICE transports exist), before gathering. */
export function withoutImplicitStun(pc: RTCPeerConnection): void {
  if (pc.config.iceServers.some((server) => isStun(server.urls))) return;
  for (const transport of pc.iceTransports) transport.connection.stunServer = undefined;
}
