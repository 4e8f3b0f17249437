import { describe, expect, it } from 'vitest';
import type { RuntimeEvent } from '../../protocol/session-logs.ts';
import { RuntimeEventLog } from './runtime-event-log.ts';

describe('RuntimeEventLog', () => {
  it('numbers events, tells subscribers, and keeps the newest for readers that resume', () => {
    const log = new RuntimeEventLog({ kept: 3, now: () => 42 });
    const seen: RuntimeEvent[] = [];
    const unsubscribe = log.subscribe((e) => seen.push(e));
    for (let i = 1; i <= 5; i++) log.publish({ type: 'session_opened', session_id: `s${i}` });
    unsubscribe();
    log.publish({ type: 'session_ended', session_id: 's5', reason: 'stopped' });
    expect(seen.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(seen[0]).toEqual({ seq: 1, time: 42, type: 'session_opened', session_id: 's1' });
    // Kept: 4, 5, 6. From the start, 1–3 are gone.
    expect(log.since(0)).toMatchObject({ missed: 3 });
    expect(log.since(0).events.map((e) => e.seq)).toEqual([4, 5, 6]);
    expect(log.since(4)).toMatchObject({ missed: 0 });
    expect(log.since(4).events.map((e) => e.seq)).toEqual([5, 6]);
    expect(log.since(6).events).toEqual([]);
  });
});
