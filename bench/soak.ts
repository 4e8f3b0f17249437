/**
 * Soak (issue 8): the hosted service under an hour of session churn with reconnects — does
 * anything grow that should not? Memory (RSS slope), open descriptors, emit → send latency.
 *
 *   node --conditions=source --import tsx bench/soak.ts [--minutes 60] [--users 4] [--watch 5-30]
 *        [--sample-every 10] [--window 300] [--quiet-every 300] [--json out.json]
 *
 * `arclight coordinator` (SQLite, a temp file) and one hosted `pattern` runtime per user run as
 * child processes on 127.0.0.1 (a hosted runtime has one slot). Each user loops: a fresh token,
 * a session with the Node client, 720p video for `--watch` seconds with two commands, in every
 * other session a recoverable disconnect and `reconnect()` after 0.5–3 s, then the session ended.
 * Every `--sample-every` seconds each process's VmRSS and open fds are read from /proc, and each
 * runtime's /metrics (`arclight_video_emit_to_send_seconds`, `arclight_sessions`,
 * `arclight_connections`). Every `--quiet-every` seconds the churn pauses until no session is open
 * and the fds are read again: those quiet points, first to last, must not grow. A line is printed
 * every `--window` seconds, the figures at the end; thresholds: THRESHOLDS in
 * bench/support/soak-figures.ts (exit 1 when one is crossed). SOAK_MINUTES sets the default length.
 */

import { parseArgs } from 'node:util';
import { loadavg } from './support/measure.ts';
import { finishReport, runBench, runInfo } from './support/report.ts';
import { formatFigures, THRESHOLDS, thresholdsCrossed } from './support/soak-figures.ts';
import { runSoak } from './support/soak-run.ts';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: process.env['SOAK_MINUTES'] ?? '60' },
    users: { type: 'string', default: '4' },
    watch: { type: 'string', default: '5-30' },
    'sample-every': { type: 'string', default: '10' },
    window: { type: 'string', default: '300' },
    'quiet-every': { type: 'string', default: '300' },
    json: { type: 'string' },
  },
});

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!(value > 0)) throw new Error(`--${name} must be a positive number; got "${text}"`);
  return value;
}

const watchMatch = /^(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$/.exec(args.watch);
if (!watchMatch || Number(watchMatch[1]) > Number(watchMatch[2])) throw new Error(`--watch must be MIN-MAX seconds; got "${args.watch}"`);

await runBench('soak', async () => {
  const info = runInfo();
  const settings = {
    minutes: positive('minutes', args.minutes),
    users: Math.round(positive('users', args.users)),
    watchSeconds: [Number(watchMatch[1]), Number(watchMatch[2])] as const,
    sampleEverySeconds: positive('sample-every', args['sample-every']),
    windowSeconds: positive('window', args.window),
    quietEverySeconds: positive('quiet-every', args['quiet-every']),
    warmupFraction: 0.1,
  };
  process.stdout.write(
    `soak: ${settings.minutes} min, ${settings.users} users, watch ${args.watch} s, sampling every ${settings.sampleEverySeconds} s, ` +
      `quiet point every ${settings.quietEverySeconds} s (machine: ${String(info.machine['nproc'])} cores, loadavg ${info.loadavgBefore})\n`,
  );
  const figures = await runSoak({ ...settings, onProgress: (line) => process.stdout.write(`${line}\n`) });
  const reasons = thresholdsCrossed(figures);
  process.stdout.write(`\n${formatFigures(figures, reasons)}\n`);
  finishReport(info, loadavg(), args.json, { thresholds: THRESHOLDS, figures, crossed: reasons });
  // runBench exits 0 when main returns: a crossed threshold is a failed run, not a crashed one.
  if (reasons.length > 0) process.exit(1);
});
