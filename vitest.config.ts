import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

/**
 * Browser end-to-end tests (Chromium in a network namespace, see
 * test/support/) are CPU-heavy; they live in `*.browser.test.ts` files and
 * run one file at a time after the unit tests.
 */
const BROWSER_TESTS = ['**/*.browser.test.ts', 'test/support/harness.test.ts'];
// .tmp/ is gitignored scratch space.
// dev/scaffold/template/ is the project `arclight init` writes: its tests run under node:test there.
const EXCLUDE = ['**/node_modules/**', '**/dist/**', '**/.tmp/**', 'dev/scaffold/template/**'];

export default defineConfig({
  resolve: {
    // Exact-match regexes so `arclight/client` does not swallow `arclight/client/node`.
    alias: [
      { find: /^arclight\/runtime$/, replacement: src('./runtime/index.ts') },
      { find: /^arclight\/client$/, replacement: src('./client/index.ts') },
      { find: /^arclight\/client\/node$/, replacement: src('./client/node.ts') },
      { find: /^arclight\/client\/server$/, replacement: src('./client/server.ts') },
      { find: /^arclight\/client\/react$/, replacement: src('./client/react/index.ts') },
      { find: /^arclight\/protocol$/, replacement: src('./protocol/index.ts') },
      { find: /^arclight\/coordinator$/, replacement: src('./coordinator/index.ts') },
      { find: /^arclight\/testing$/, replacement: src('./runtime/testing/index.ts') },
    ],
  },
  test: {
    // Native addons (node-av, wrtc) are not safe in worker_threads: use child processes.
    pool: 'forks',
    // Runtimes started by tests log at warn and above: info lines would bury the test report.
    // Coordinators on PostgreSQL refuse to start without a signing-key secret (production must
    // supply one): every coordinator a test starts — in process, or a child process inheriting
    // the environment — gets this throwaway one. Tests of the secret's absence unset it.
    env: { ARCLIGHT_LOG: 'warn', ARCLIGHT_SIGNING_KEY_SECRET: 'arclight-tests-only-signing-key-secret' },
    // The second names any test file whose worker died mid-run, which Vitest itself does not.
    reporters: ['default', './test/support/unfinished-files-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // CI machines have 2 cores.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['**/*.test.ts'],
          exclude: [...EXCLUDE, ...BROWSER_TESTS],
        },
      },
      {
        extends: true,
        test: {
          name: 'browser',
          include: BROWSER_TESTS,
          exclude: EXCLUDE,
          // One browser file at a time, in a later group than the unit tests
          // (projects with a higher groupOrder start after lower ones finish).
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
