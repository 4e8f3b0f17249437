/**
 * docs/errors.md against protocol/errors.ts: clients branch on codes, and the page is where app
 * authors learn them, so a code added without a row — or a row whose status drifted from what the
 * services answer — is a documentation bug this catches.
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, WARNING_CODES } from '../../protocol/errors.ts';

const page = readFileSync(fileURLToPath(new URL('../../docs/errors.md', import.meta.url)), 'utf8');

/** Table rows that start with a code: `| \`code\` | second cell | …` → [code, second cell]. */
function rows(section: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const match of section.matchAll(/^\| `([a-z_]+)` \| ([^|]*) \|/gm)) found.set(match[1]!, match[2]!.trim());
  return found;
}

const [errorsPart, warningsPart] = page.split(/^## Warnings$/m) as [string, string | undefined];

describe('docs/errors.md', () => {
  it('has a row for every error code, and no row for a code that does not exist', () => {
    const documented = rows(errorsPart);
    expect([...documented.keys()].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  it("gives each code's HTTP status as protocol/errors.ts does, or — for codes that never travel over HTTP", () => {
    for (const [code, http] of rows(errorsPart)) {
      if (http === '—') continue;
      expect(Number(http), code).toBe(ERROR_CODES[code as keyof typeof ERROR_CODES].status);
    }
    // Answered over HTTP by the coordinator (transport and log calls before a GPU is assigned).
    expect(rows(errorsPart).get('not_ready')).toBe('409');
  });

  it('lists every warning code under Warnings', () => {
    expect(warningsPart).toBeDefined();
    expect([...rows(warningsPart!).keys()].sort()).toEqual(Object.keys(WARNING_CODES).sort());
  });

  it("states each service's body limit as the code sets it", async () => {
    const { MAX_BODY_BYTES: runtimeLimit } = await import('../../runtime/http/json-body.ts');
    const { MAX_BODY_BYTES: coordinatorLimit } = await import('../../coordinator/http/request-body.ts');
    const row = /^\| `payload_too_large` \|.*$/m.exec(errorsPart)![0];
    expect(row).toContain(`${runtimeLimit / 1024} KiB on a runtime`);
    expect(row).toContain(`${coordinatorLimit / 1024} KiB on the coordinator`);
  });
});
