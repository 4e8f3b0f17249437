/**
 * An example moderator: rejects text that contains a listed word or phrase, as a whole word,
 * ignoring case. It shows the `Moderator` interface and serves tests and local demos; a word list
 * is not moderation a product should rely on — use a real classifier (e.g. behind `HttpModerator`).
 *
 * @example
 * ```ts
 * import { startRuntime, WordListModerator } from 'arclight/runtime';
 * await startRuntime({ model, moderation: { moderator: new WordListModerator(['darn', 'heck']) } });
 * ```
 */

import type { ModerationRequest, ModerationVerdict, Moderator } from './moderator.ts';

export class WordListModerator implements Moderator {
  readonly #pattern: RegExp | undefined;
  readonly #category: string;

  constructor(words: Iterable<string>, options: { readonly category?: string } = {}) {
    const listed = [...words].map((w) => w.trim()).filter((w) => w !== '');
    // Letters, digits and `_` of any script count as word characters, so "class" does not match "ass".
    this.#pattern =
      listed.length === 0
        ? undefined
        : new RegExp(`(?<![\\p{L}\\p{N}_])(?:${listed.map(escapeRegExp).join('|')})(?![\\p{L}\\p{N}_])`, 'iu');
    this.#category = options.category ?? 'blocked_word';
  }

  check({ fields }: ModerationRequest): ModerationVerdict {
    for (const [field, text] of Object.entries(fields)) {
      if (this.#pattern?.test(text))
        return { allowed: false, reason: `"${field}" contains a blocked word`, category: this.#category, field };
    }
    return { allowed: true };
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
