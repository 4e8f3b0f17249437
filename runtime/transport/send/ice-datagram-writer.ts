/**
 * Writes an already-protected SRTP packet to a connection's nominated ICE candidate pair.
 *
 * werift's path for this (`Connection.send` → `StunProtocol.sendData` → `UdpTransport.send`)
 * is three async functions per packet — three promises and their closures for every packet to
 * every viewer, which showed up as garbage-collection time that grew with the viewer count.
 * For the usual pair (plain UDP: host or server-reflexive candidates) this goes straight to the
 * pair's socket with werift's own checks; any other pair (TURN relay, ICE-TCP) takes werift's
 * path unchanged.
 */

import type { Socket } from 'node:dgram';
import { StunProtocol, UdpTransport, type CandidatePair, type RTCDtlsTransport } from 'werift';

/** werift's `Connection` members used here (`canSendApplicationData` is private in its types). */
interface IceConnectionInternals {
  readonly nominated?: CandidatePair;
  canSendApplicationData(): boolean;
  send(data: Buffer): Promise<void>;
}

/** A nominated pair that is plain UDP, with its socket and remote address resolved once. */
interface UdpPath {
  readonly pair: CandidatePair;
  readonly transport: UdpTransport;
  readonly socket: Socket;
  readonly host: string;
  readonly port: number;
}

/** Send errors mean the path is gone; the connection notices through its ICE state. */
const ignoreSendError = (): void => {};

export class IceDatagramWriter {
  #path: UdpPath | undefined;
  #pathPair: CandidatePair | undefined;

  write(dtls: RTCDtlsTransport, packet: Buffer): void {
    const connection = dtls.iceTransport.connection as unknown as IceConnectionInternals;
    const pair = connection.nominated;
    if (pair === undefined) return;
    if (pair !== this.#pathPair) {
      this.#pathPair = pair;
      this.#path = udpPath(pair);
    }
    const path = this.#path;
    if (path === undefined) {
      connection.send(packet).catch(ignoreSendError);
      return;
    }
    if (path.transport.closed || !connection.canSendApplicationData()) return;
    // A callback, so a failed send is not an 'error' event on werift's socket (it has no listener).
    path.socket.send(packet, path.port, path.host, ignoreSendError);
    pair.packetsSent++;
    pair.bytesSent += packet.length;
  }
}

function udpPath(pair: CandidatePair): UdpPath | undefined {
  const protocol = pair.protocol;
  if (!(protocol instanceof StunProtocol) || !(protocol.transport instanceof UdpTransport)) return undefined;
  const [host, port] = pair.remoteAddr;
  return { pair, transport: protocol.transport, socket: protocol.transport.socket, host, port };
}
