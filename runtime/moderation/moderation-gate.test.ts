/**
 * The moderation gate on its own, on a fake clock: checks one at a time in arrival order, the
 * 2 s admission counted from arrival (queue wait included), late verdicts ignored, fail-open on
 * a moderator that throws or answers nonsense, and the session's end.
 */

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../server-kit/log.ts';
import { RuntimeMetrics } from '../metrics.ts';
import { ModerationGate, type GateDecision } from './moderation-gate.ts';
import type { ModerationRequest, ModerationVerdict, Moderator } from './moderator.ts';

const log = createLogger({}, 'silent');

/** A moderator whose checks the test answers by hand, recording what it saw. */
class ManualModerator implements Moderator {
  readonly seen: ModerationRequest[] = [];
  readonly #answers: Array<(verdict: ModerationVerdict | Error) => void> = [];
  active = 0;
  maxActive = 0;

  check(request: ModerationRequest): Promise<ModerationVerdict> {
    this.seen.push(request);
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    return new Promise((resolve, reject) => {
      const settle = (verdict: ModerationVerdict | Error): void => {
        const index = this.#answers.indexOf(settle);
        if (index < 0) return;
        this.#answers.splice(index, 1);
        this.active--;
        if (verdict instanceof Error) reject(verdict);
        else resolve(verdict);
      };
      this.#answers.push(settle);
      // An abandoned check ends as a fetch does: its signal rejects it.
      request.signal.addEventListener('abort', () => settle(new Error('aborted')), { once: true });
    });
  }

  /** Answers the oldest unanswered check. */
  answer(verdict: ModerationVerdict | Error): void {
    const next = this.#answers[0];
    if (!next) throw new Error('no check is waiting');
    next(verdict);
  }
}

async function checksTotal(metrics: RuntimeMetrics, outcome: string): Promise<number> {
  const metric = await metrics.moderationChecks.get();
  return metric.values.find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
}

/** Records each decision as it settles, so a test can see what has settled so far. */
function track(promise: Promise<GateDecision>): { decision: GateDecision | undefined } {
  const holder: { decision: GateDecision | undefined } = { decision: undefined };
  void promise.then((d) => (holder.decision = d));
  return holder;
}

describe('ModerationGate', () => {
  let session: AbortController;
  let metrics: RuntimeMetrics;
  let moderator: ManualModerator;
  let gate: ModerationGate;

  beforeEach(() => {
    vi.useFakeTimers();
    session = new AbortController();
    metrics = new RuntimeMetrics({ processMetrics: false });
    moderator = new ManualModerator();
    gate = new ModerationGate({ sessionId: 's1', moderator, admitAfterMs: 2_000, signal: session.signal, log, metrics });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('checks one command at a time, in arrival order', async () => {
    const a = track(gate.check('caption', { '/text': 'one' }));
    const b = track(gate.check('caption', { '/text': 'two' }));
    const c = track(gate.check('caption', { '/text': 'three' }));
    await vi.advanceTimersByTimeAsync(0);
    expect(moderator.seen.map((r) => r.fields['/text'])).toEqual(['one']);
    expect(gate.waiting).toBe(3);
    moderator.answer({ allowed: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(a.decision).toEqual({ admitted: true, outcome: 'allowed' });
    expect(moderator.seen.map((r) => r.fields['/text'])).toEqual(['one', 'two']);
    moderator.answer({ allowed: false, reason: 'no', category: 'rude', field: '/text' });
    await vi.advanceTimersByTimeAsync(0);
    expect(b.decision).toEqual({ admitted: false, outcome: 'rejected', reason: 'no', category: 'rude', field: '/text' });
    moderator.answer({ allowed: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(c.decision?.admitted).toBe(true);
    expect(moderator.maxActive).toBe(1);
    expect(moderator.seen.every((r) => r.sessionId === 's1' && r.command === 'caption')).toBe(true);
    expect(await checksTotal(metrics, 'allowed')).toBe(2);
    expect(await checksTotal(metrics, 'rejected')).toBe(1);
    expect(gate.waiting).toBe(0);
  });

  it('admits a command with no verdict 2 s after it arrived, abandons its check and ignores a late verdict', async () => {
    const a = track(gate.check('caption', { '/text': 'slow' }));
    await vi.advanceTimersByTimeAsync(1_999);
    expect(a.decision).toBeUndefined();
    const signal = moderator.seen[0]!.signal;
    expect(signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(a.decision).toEqual({ admitted: true, outcome: 'timeout' });
    expect(signal.aborted).toBe(true);
    expect(await checksTotal(metrics, 'timeout')).toBe(1);
    expect(await checksTotal(metrics, 'rejected')).toBe(0);
  });

  it('counts queue wait toward the 2 s: a command whose turn never came runs unchecked', async () => {
    const first = track(gate.check('caption', { '/text': 'first' }));
    await vi.advanceTimersByTimeAsync(1_500);
    const second = track(gate.check('caption', { '/text': 'second' }));
    await vi.advanceTimersByTimeAsync(500);
    // The first reached 2 s: admitted, its check abandoned; the second's check starts now.
    expect(first.decision?.outcome).toBe('timeout');
    expect(moderator.seen.map((r) => r.fields['/text'])).toEqual(['first', 'second']);
    const third = track(gate.check('caption', { '/text': 'third' }));
    await vi.advanceTimersByTimeAsync(1_500);
    // The second reached its 2 s (1.5 s of it queued) without a verdict; the third is checked next.
    expect(second.decision?.outcome).toBe('timeout');
    expect(moderator.seen.map((r) => r.fields['/text'])).toEqual(['first', 'second', 'third']);
    expect(moderator.active).toBe(1); // abandoned checks were aborted: only the third's is open
    expect(third.decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(500);
    expect(third.decision?.outcome).toBe('timeout');
    expect(await checksTotal(metrics, 'timeout')).toBe(3);
  });

  it('drops a queued command from the queue at its deadline, so the moderator never sees it', async () => {
    const first = track(gate.check('caption', { '/text': 'first' }));
    await vi.advanceTimersByTimeAsync(10);
    const queued = track(gate.check('caption', { '/text': 'queued' }));
    // The first holds the moderator until just before the queued one's deadline passes.
    await vi.advanceTimersByTimeAsync(1_980);
    moderator.answer({ allowed: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(first.decision?.outcome).toBe('allowed');
    expect(moderator.seen.map((r) => r.fields['/text'])).toEqual(['first', 'queued']);
    await vi.advanceTimersByTimeAsync(19);
    expect(queued.decision).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(queued.decision?.outcome).toBe('timeout');
    // Another session's gate, where a command's deadline passes while it is still queued.
    const other = new ManualModerator();
    const g = new ModerationGate({ sessionId: 's2', moderator: other, admitAfterMs: 2_000, signal: session.signal, log });
    const head = track(g.check('caption', { '/text': 'head' }));
    const behind = track(g.check('caption', { '/text': 'behind' }));
    await vi.advanceTimersByTimeAsync(2_000);
    // Both reached 2 s together: the head's check was abandoned, the one behind never started.
    expect(head.decision?.outcome).toBe('timeout');
    expect(behind.decision?.outcome).toBe('timeout');
    expect(other.seen.map((r) => r.fields['/text'])).toEqual(['head']);
  });

  it('admits when the moderator throws (also synchronously) or answers something that is not a verdict', async () => {
    const throwing = new ModerationGate({
      sessionId: 's3',
      moderator: {
        check: () => {
          throw new Error('boom');
        },
      },
      admitAfterMs: 2_000,
      signal: session.signal,
      log,
      metrics,
    });
    expect(await throwing.check('caption', { '/text': 'x' })).toEqual({ admitted: true, outcome: 'error' });
    const a = track(gate.check('caption', { '/text': 'x' }));
    await vi.advanceTimersByTimeAsync(0);
    moderator.answer(new Error('service down'));
    await vi.advanceTimersByTimeAsync(0);
    expect(a.decision).toEqual({ admitted: true, outcome: 'error' });
    const b = track(gate.check('caption', { '/text': 'y' }));
    await vi.advanceTimersByTimeAsync(0);
    moderator.answer({ allowed: 'maybe' } as unknown as ModerationVerdict);
    await vi.advanceTimersByTimeAsync(0);
    expect(b.decision).toEqual({ admitted: true, outcome: 'error' });
    expect(await checksTotal(metrics, 'error')).toBe(3);
  });

  it('keeps only a field the check was about, and bounds what a moderator says', async () => {
    const a = track(gate.check('caption', { '/text': 'x' }));
    await vi.advanceTimersByTimeAsync(0);
    moderator.answer({ allowed: false, reason: 'r'.repeat(5_000), field: '/elsewhere' });
    await vi.advanceTimersByTimeAsync(0);
    expect(a.decision).toEqual({ admitted: false, outcome: 'rejected', reason: 'r'.repeat(1_024) });
  });

  it('ends every waiting command when the session ends, and takes none after', async () => {
    const running = track(gate.check('caption', { '/text': 'a' }));
    const queued = track(gate.check('caption', { '/text': 'b' }));
    await vi.advanceTimersByTimeAsync(0);
    session.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(running.decision).toEqual({ admitted: false, outcome: 'ended' });
    expect(queued.decision).toEqual({ admitted: false, outcome: 'ended' });
    expect(moderator.seen[0]!.signal.aborted).toBe(true);
    expect(moderator.seen).toHaveLength(1);
    expect(await gate.check('caption', { '/text': 'c' })).toEqual({ admitted: false, outcome: 'ended' });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(await checksTotal(metrics, 'timeout')).toBe(0);
  });
});
