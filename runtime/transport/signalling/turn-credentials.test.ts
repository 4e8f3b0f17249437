import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_TURN_TTL_SECONDS, TurnCredentialIssuer, turnCredential, turnPassword } from './turn-credentials.ts';

/** `printf %s USERNAME | openssl dgst -sha1 -hmac SECRET -binary | base64`, run once by hand. */
const VECTOR = { secret: 's3cret', username: '1700000000:alice', password: 'TtElzSjT0GdnTQ9xdcRNxx96yQs=' };

function opensslPassword(secret: string, username: string): string | undefined {
  try {
    const mac = execFileSync('openssl', ['dgst', '-sha1', '-hmac', secret, '-binary'], { input: username });
    return mac.toString('base64');
  } catch {
    return undefined; // no openssl here: the fixed vector still checks the maths
  }
}

describe('TURN REST-API credentials (coturn use-auth-secret)', () => {
  it('password = base64(HMAC-SHA1(secret, username)): a fixed vector', () => {
    expect(turnPassword(VECTOR.secret, VECTOR.username)).toBe(VECTOR.password);
    expect(turnCredential(VECTOR.secret, 1_700_000_000, 'alice')).toEqual({ username: VECTOR.username, password: VECTOR.password });
  });

  it('matches openssl for other secrets and usernames', () => {
    for (const [secret, username] of [
      [
        'a much longer shared secret, longer than one SHA-1 block of sixty-four bytes, to exercise key hashing',
        '1893456000:4f9c2a1e-7b3d-4c55-9e61-0a2b3c4d5e6f',
      ],
      ['ünïcødé', '1:x'],
    ] as const) {
      const expected = opensslPassword(secret, username);
      if (expected === undefined) continue;
      expect(turnPassword(secret, username)).toBe(expected);
    }
  });

  it('issues <expiry>:<session id> with the expiry ttl seconds from now, and a fresh credential per call', () => {
    let now = 1_700_000_000_500; // ms: a fraction of a second is dropped, not rounded up
    const issuer = new TurnCredentialIssuer(
      { urls: ['turn:turn.example.com:3478?transport=udp', 'turns:turn.example.com:5349'], secret: 'k', ttlSeconds: 600 },
      () => now,
    );
    const sessionId = '4f9c2a1e-7b3d-4c55-9e61-0a2b3c4d5e6f';
    const entry = issuer.issue(sessionId);
    expect(entry.uris).toEqual(['turn:turn.example.com:3478?transport=udp', 'turns:turn.example.com:5349']);
    expect(entry.credentials).toEqual({ username: `1700000600:${sessionId}`, password: turnPassword('k', `1700000600:${sessionId}`) });
    now += 10_000;
    const later = issuer.issue(sessionId);
    expect(later.credentials?.username).toBe(`1700000610:${sessionId}`);
    expect(later.credentials?.password).not.toBe(entry.credentials?.password);
  });

  it('defaults to one hour, and replaces an id that is not a plain token with a random one', () => {
    const issuer = new TurnCredentialIssuer({ urls: ['turn:t:3478'], secret: 'k' }, () => 0);
    expect(issuer.ttlSeconds).toBe(DEFAULT_TURN_TTL_SECONDS);
    expect(DEFAULT_TURN_TTL_SECONDS).toBe(3600);
    const odd = issuer.issue('has:colon and spaces');
    expect(odd.credentials?.username).toMatch(/^3600:[0-9a-f-]{36}$/);
    expect(issuer.issue().credentials?.username).toMatch(/^3600:[0-9a-f-]{36}$/);
  });

  it('never puts the secret in what it issues', () => {
    const secret = 'do-not-leak-this-secret';
    const issuer = new TurnCredentialIssuer({ urls: ['turn:t:3478'], secret });
    expect(JSON.stringify(issuer.issue('s1'))).not.toContain(secret);
    expect(JSON.stringify(issuer)).not.toContain(secret);
  });

  it('refuses a configuration that cannot work, at construction', () => {
    expect(() => new TurnCredentialIssuer({ urls: [], secret: 'k' })).toThrow(/at least one TURN URL/);
    expect(() => new TurnCredentialIssuer({ urls: ['stun:s:3478'], secret: 'k' })).toThrow(/turn: or turns:/);
    expect(() => new TurnCredentialIssuer({ urls: ['turn:t'], secret: '' })).toThrow(/secret/);
    expect(() => new TurnCredentialIssuer({ urls: ['turn:t'], secret: 'k', ttlSeconds: 0 })).toThrow(/ttlSeconds/);
    expect(() => new TurnCredentialIssuer({ urls: ['turn:t'], secret: 'k', ttlSeconds: 1.5 })).toThrow(/ttlSeconds/);
  });
});
