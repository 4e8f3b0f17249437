/**
 * `arclight serve`'s ICE flags → `RuntimeOptions.ice`: where media may flow (--ice-host,
 * --ice-port-range, --public-ip) and the TURN server clients get credentials for (--turn-url,
 * --turn-ttl, the secret from $ARCLIGHT_TURN_SECRET — never a flag, so it stays out of `ps`).
 */

import { isIP } from 'node:net';
import type { RuntimeIceOptions } from './server.ts';

/** The flags as `util.parseArgs` gives them. */
export interface IceFlags {
  readonly 'ice-host'?: readonly string[];
  readonly 'ice-port-range'?: string;
  readonly 'public-ip'?: string;
  readonly 'turn-url'?: readonly string[];
  readonly 'turn-ttl'?: string;
}

/** The environment variable holding the TURN shared secret (coturn's static-auth-secret). */
export const TURN_SECRET_ENV = 'ARCLIGHT_TURN_SECRET';

/** The ICE options, or the message to print (exit 2) when a flag is wrong. */
export function iceOptionsFromFlags(
  flags: IceFlags,
  env: Readonly<Record<string, string | undefined>>,
): { ice: RuntimeIceOptions } | { error: string } {
  let portRange: [number, number] | undefined;
  if (flags['ice-port-range'] !== undefined) {
    const match = /^(\d{1,5})-(\d{1,5})$/.exec(flags['ice-port-range']);
    const min = Number(match?.[1]);
    const max = Number(match?.[2]);
    if (!match || !(min >= 1 && min < max && max <= 65535))
      return { error: '--ice-port-range must look like 40000-40999 (1 ≤ first < last ≤ 65535)' };
    portRange = [min, max];
  }
  const publicIp = flags['public-ip'];
  if (publicIp !== undefined && isIP(publicIp) === 0) return { error: `--public-ip must be an IPv4 or IPv6 address; got "${publicIp}"` };
  for (const address of flags['ice-host'] ?? []) {
    if (isIP(address) === 0) return { error: `--ice-host must be an IP address; got "${address}"` };
  }

  const turnUrls = flags['turn-url'] ?? [];
  const secret = env[TURN_SECRET_ENV];
  if (flags['turn-ttl'] !== undefined && turnUrls.length === 0) return { error: '--turn-ttl needs --turn-url' };
  let turn: RuntimeIceOptions['turn'];
  if (turnUrls.length > 0) {
    for (const url of turnUrls) {
      if (!/^turns?:\S+$/.test(url))
        return { error: `--turn-url must be a turn: or turns: URL (e.g. turn:turn.example.com:3478?transport=udp); got "${url}"` };
    }
    if (!secret) return { error: `--turn-url needs the shared secret (coturn static-auth-secret) in $${TURN_SECRET_ENV}` };
    let ttlSeconds: number | undefined;
    if (flags['turn-ttl'] !== undefined) {
      ttlSeconds = /^\d{1,9}$/.test(flags['turn-ttl']) ? Number(flags['turn-ttl']) : NaN;
      if (!(ttlSeconds > 0)) return { error: '--turn-ttl must be a positive whole number of seconds' };
    }
    turn = { urls: turnUrls, secret, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) };
  }
  return {
    ice: {
      ...(flags['ice-host'] ? { hostAddresses: flags['ice-host'] } : {}),
      ...(portRange ? { portRange } : {}),
      ...(publicIp !== undefined ? { publicAddress: publicIp } : {}),
      ...(turn ? { turn } : {}),
    },
  };
}
