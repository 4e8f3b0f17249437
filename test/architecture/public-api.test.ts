/**
 * What apps and models can import, held still while the code behind it moves (issue 23): the
 * checker's view of every package export (public-api.ts) against the record in public-api.txt.
 * An intended change to the API rewrites the record, and the diff shows in review.
 */

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { describePublicApi } from './public-api.ts';

describe('public API', () => {
  it('is what public-api.txt records (after an intended change: npx tsx test/architecture/public-api.ts > test/architecture/public-api.txt)', () => {
    const recorded = readFileSync(new URL('./public-api.txt', import.meta.url), 'utf8');
    expect(describePublicApi()).toBe(recorded);
  }, 120_000);
});
