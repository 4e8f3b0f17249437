/**
 * The frame every benchmark script's report shares: machine facts first, load averages and the
 * optional JSON file last, and how the script exits.
 */

import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg, machine } from './measure.ts';

export interface RunInfo {
  machine: Record<string, unknown>;
  /** The commit measured, and source files that differed from it when the run started (others may be editing). */
  source: { commit: string; modified: string[] };
  loadavgBefore: string;
  startedAt: string;
}

function sourceState(): RunInfo['source'] {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const modified = execFileSync('git', ['status', '--porcelain', '--', 'runtime', 'client', 'protocol', 'models', 'bench'], {
      encoding: 'utf8',
    })
      .split('\n')
      .filter(Boolean)
      .map((line) => line.trim());
    return { commit, modified };
  } catch {
    return { commit: 'unknown', modified: [] };
  }
}

/** Machine facts, the source state and load, taken before the first measurement. */
export function runInfo(): RunInfo {
  return { machine: machine(), source: sourceState(), loadavgBefore: loadavg(), startedAt: new Date().toISOString() };
}

/** Prints the load averages before and after; with a `--json` path, writes `{...info, loadavgAfter, ...results}` there. */
export function finishReport(info: RunInfo, loadavgAfter: string, jsonPath: string | undefined, results: Record<string, unknown>): void {
  process.stdout.write(`loadavg before: ${info.loadavgBefore}\nloadavg after:  ${loadavgAfter}\n`);
  if (jsonPath) {
    writeFileSync(jsonPath, JSON.stringify({ ...info, loadavgAfter, ...results }, null, 2));
    process.stdout.write(`wrote ${jsonPath}\n`);
  }
}

/**
 * Runs a script's `main` and exits the process: 1 (with `<name> failed: <stack>` on stderr) when it
 * throws, 0 otherwise. Exiting explicitly matters: wrtc and node-av threads can hang or crash
 * Node's normal exit.
 */
export async function runBench(name: string, main: () => Promise<void>): Promise<never> {
  try {
    await main();
  } catch (error) {
    process.stderr.write(`${name} failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  }
  process.exit(0);
}
