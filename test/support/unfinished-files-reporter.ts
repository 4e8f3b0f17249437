import type { Reporter, TestCase, TestModule } from 'vitest/node';

/**
 * Names the test files that started but never finished, and the test each was in.
 *
 * Why: when a forks-pool worker dies (a native addon crashes, the process is killed for memory)
 * Vitest says only "Worker exited unexpectedly" and counts the file as missing from the total;
 * which file it was, and where in it, is lost, and CI's log is read from its tail. This prints it
 * at the end of the run, where the tail shows it.
 */
export default class UnfinishedFilesReporter implements Reporter {
  readonly #started = new Map<string, string | undefined>();
  /** Files that finished: a fast file's last test-ready event can arrive after its end (Vitest batches them). */
  readonly #ended = new Set<string>();

  onTestModuleStart(testModule: TestModule): void {
    if (!this.#ended.has(testModule.moduleId)) this.#started.set(testModule.moduleId, undefined);
  }

  onTestCaseReady(testCase: TestCase): void {
    if (!this.#ended.has(testCase.module.moduleId)) this.#started.set(testCase.module.moduleId, testCase.fullName);
  }

  onTestModuleEnd(testModule: TestModule): void {
    this.#ended.add(testModule.moduleId);
    this.#started.delete(testModule.moduleId);
  }

  onTestRunEnd(): void {
    if (this.#started.size === 0) return;
    const lines = [...this.#started].map(
      ([file, test]) => `  ${file}${test === undefined ? ' (no test reported yet)' : ` — in "${test}"`}`,
    );
    process.stderr.write(`\nTest files that started and never finished (their worker died?):\n${lines.join('\n')}\n`);
  }
}
