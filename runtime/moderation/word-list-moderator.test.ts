/** The example word-list moderator: whole words and phrases, any case, any script. */

import { describe, expect, it } from 'vitest';
import { WordListModerator } from './word-list-moderator.ts';

const check = (moderator: WordListModerator, fields: Record<string, string>) =>
  moderator.check({ sessionId: 's', command: 'caption', fields, signal: new AbortController().signal });

describe('WordListModerator', () => {
  const moderator = new WordListModerator(['darn', 'Heck', 'no way', 'straße', 'a.b', ' ']);

  it('rejects a listed word as a whole word, ignoring case, naming the field', () => {
    expect(check(moderator, { '/title': 'fine', '/text': 'Well DARN it' })).toEqual({
      allowed: false,
      reason: '"/text" contains a blocked word',
      category: 'blocked_word',
      field: '/text',
    });
    expect(check(moderator, { '/text': 'heck!' }).allowed).toBe(false);
    expect(check(moderator, { '/text': 'NO WAY' }).allowed).toBe(false);
    expect(check(moderator, { '/text': 'STRASSE' }).allowed).toBe(true); // simple case folding only
    expect(check(moderator, { '/text': 'Straße' }).allowed).toBe(false);
  });

  it('allows words that merely contain a listed one, and treats regex characters literally', () => {
    expect(check(moderator, { '/text': 'darning socks, checkmate, darn_it, darn2' })).toEqual({ allowed: true });
    expect(check(moderator, { '/text': 'axb' })).toEqual({ allowed: true });
    expect(check(moderator, { '/text': 'see a.b here' }).allowed).toBe(false);
  });

  it('allows everything with an empty list', () => {
    expect(check(new WordListModerator([]), { '/text': 'anything' })).toEqual({ allowed: true });
    expect(check(new WordListModerator(['x'], { category: 'custom' }), { '/t': 'x' })).toMatchObject({ category: 'custom' });
  });
});
