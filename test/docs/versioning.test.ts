/**
 * One version everywhere (spec: "semantic release numbers … breaking changes are flagged per
 * release"): package.json, SERVER_VERSION (server_info.server_version), both servers' GET /health,
 * and CHANGELOG.md's newest release, which like every release has a Breaking section.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pattern from '../../models/examples/pattern/index.ts';
import { startCoordinator, type Coordinator } from '../../coordinator/index.ts';
import { SERVER_VERSION } from '../../protocol/versions.ts';
import { startRuntime, type Runtime } from '../../runtime/index.ts';
import { freshDatabase } from '../coordinator/storage-engines.ts';

const read = (path: string): string => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');
const packageVersion = (JSON.parse(read('package.json')) as { version: string }).version;
const changelog = read('CHANGELOG.md');

/** `## [x.y.z] - date` sections, newest first, with their text. */
function releases(): Array<{ version: string; body: string }> {
  const headings = [...changelog.matchAll(/^## \[([^\]]+)\](.*)$/gm)];
  return headings.map((heading, i) => ({
    version: heading[1]!,
    body: changelog.slice(heading.index! + heading[0].length, headings[i + 1]?.index ?? changelog.length),
  }));
}

describe('versioning', () => {
  let runtime: Runtime;
  let coordinator: Coordinator;
  beforeAll(async () => {
    runtime = await startRuntime({ model: pattern as never, port: 0, host: '127.0.0.1', playground: false });
    coordinator = await startCoordinator({
      database: await freshDatabase('sqlite'),
      port: 0,
      meterFlushMs: 0,
      runtimeSecret: 'versioning-test-secret',
    });
  });
  afterAll(async () => {
    await runtime?.close();
    await coordinator?.close();
  });

  it('package.json, server_info.server_version and CHANGELOG.md name the same semantic version', () => {
    expect(packageVersion).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
    expect(SERVER_VERSION).toBe(packageVersion);
    const released = releases().filter((release) => release.version !== 'Unreleased');
    expect(released[0]?.version).toBe(packageVersion);
  });

  it('every release in CHANGELOG.md has a Breaking section, the unreleased one included', () => {
    const all = releases();
    expect(all.length).toBeGreaterThan(0);
    for (const release of all) {
      expect(release.body, `## [${release.version}]`).toMatch(/^### Breaking\n- \S/m);
    }
  });

  it("both servers' GET /health report it", async () => {
    const runtimeHealth = (await (await fetch(`${runtime.url}/health`)).json()) as { version?: string };
    expect(runtimeHealth.version).toBe(packageVersion);
    const coordinatorHealth = (await (await fetch(`${coordinator.url}/health`)).json()) as { version?: string };
    expect(coordinatorHealth.version).toBe(packageVersion);
  });

  it('the docs quote the version /health reports', () => {
    for (const match of read('docs/operations.md').matchAll(/"version":"([^"]+)"/g)) expect(match[1]).toBe(packageVersion);
  });
});
