import { describe, expect, it } from 'vitest';
import { iceOptionsFromFlags } from './ice-cli-options.ts';

describe('arclight serve ICE flags', () => {
  it('maps the flags to RuntimeOptions.ice, the TURN secret from the environment', () => {
    const result = iceOptionsFromFlags(
      {
        'ice-host': ['10.0.0.5'],
        'ice-port-range': '40000-40099',
        'public-ip': '203.0.113.7',
        'turn-url': ['turn:turn.example.com:3478?transport=udp', 'turn:turn.example.com:3478?transport=tcp'],
        'turn-ttl': '600',
      },
      { ARCLIGHT_TURN_SECRET: 'shh' },
    );
    expect(result).toEqual({
      ice: {
        hostAddresses: ['10.0.0.5'],
        portRange: [40000, 40099],
        publicAddress: '203.0.113.7',
        turn: {
          urls: ['turn:turn.example.com:3478?transport=udp', 'turn:turn.example.com:3478?transport=tcp'],
          secret: 'shh',
          ttlSeconds: 600,
        },
      },
    });
  });

  it('no flags: no ICE settings (every interface, any port, no TURN)', () => {
    expect(iceOptionsFromFlags({}, { ARCLIGHT_TURN_SECRET: 'ignored without --turn-url' })).toEqual({ ice: {} });
  });

  it('says what is wrong', () => {
    const error = (
      flags: Parameters<typeof iceOptionsFromFlags>[0],
      env: Record<string, string> = { ARCLIGHT_TURN_SECRET: 's' },
    ): string => {
      const result = iceOptionsFromFlags(flags, env);
      return 'error' in result ? result.error : 'no error';
    };
    expect(error({ 'ice-port-range': '40000' })).toMatch(/--ice-port-range/);
    expect(error({ 'ice-port-range': '40100-40000' })).toMatch(/--ice-port-range/);
    expect(error({ 'ice-port-range': '0-100' })).toMatch(/--ice-port-range/);
    expect(error({ 'ice-port-range': '60000-70000' })).toMatch(/--ice-port-range/);
    expect(error({ 'public-ip': 'gpu.example.com' })).toMatch(/--public-ip/);
    expect(error({ 'ice-host': ['eth0'] })).toMatch(/--ice-host/);
    expect(error({ 'turn-url': ['stun:stun.example.com:3478'] })).toMatch(/turn: or turns:/);
    expect(error({ 'turn-url': ['turn:t:3478'] }, {})).toMatch(/ARCLIGHT_TURN_SECRET/);
    expect(error({ 'turn-url': ['turn:t:3478'], 'turn-ttl': '0' })).toMatch(/--turn-ttl/);
    expect(error({ 'turn-url': ['turn:t:3478'], 'turn-ttl': '1h' })).toMatch(/--turn-ttl/);
    expect(error({ 'turn-ttl': '60' })).toMatch(/needs --turn-url/);
  });
});
