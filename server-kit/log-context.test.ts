/**
 * The log context (log-context.ts): records written inside `runWithLogContext` carry its fields —
 * across awaits and timers, by loggers that know nothing of it — and records outside do not;
 * a record's own fields and bindings win; nested contexts merge.
 */

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLoggerTo, withLogContext, type Logger } from './log.ts';
import { logContextFields, runWithLogContext } from './log-context.ts';

/** A real logger (log.ts) writing JSON lines into memory; `records` parses what it has written so far. */
function capturedLogger(): { log: Logger; lines: string[]; readonly records: Array<Record<string, unknown>> } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return {
    log: createLoggerTo({ stream }, { process: 'runtime' }, 'debug'),
    lines,
    get records() {
      return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    },
  };
}

describe('the log context', () => {
  it('stamps records written inside it, after an await and in a timer, and not those outside', async () => {
    const out = capturedLogger();
    out.log.info('before');
    await runWithLogContext({ session: 's1', phase: 'ready' }, async () => {
      out.log.info('inside');
      await new Promise((resolve) => setTimeout(resolve, 1));
      out.log.child({ component: 'router' }).warn('after an await');
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          out.log.debug('in a timer');
          resolve();
        }, 1),
      );
    });
    out.log.info('after');
    expect(out.records.map((r) => [r['msg'], r['session'], r['phase']])).toEqual([
      ['before', undefined, undefined],
      ['inside', 's1', 'ready'],
      ['after an await', 's1', 'ready'],
      ['in a timer', 's1', 'ready'],
      ['after', undefined, undefined],
    ]);
    expect(out.records[2]).toMatchObject({ component: 'router', process: 'runtime' });
  });

  it('reads a function context at each record (the phase of the moment)', () => {
    const out = capturedLogger();
    let phase = 'starting';
    runWithLogContext(
      () => ({ session: 's1', phase }),
      () => {
        out.log.info('one');
        phase = 'ready';
        out.log.info('two');
      },
    );
    expect(out.records.map((r) => r['phase'])).toEqual(['starting', 'ready']);
  });

  it("lets a record's fields and its logger's bindings win, each key written once", () => {
    const out = capturedLogger();
    runWithLogContext({ session: 's1', phase: 'ready' }, () => {
      out.log.child({ session: 'bound' }).info('bound');
      out.log.info('explicit', { phase: 'mine' });
    });
    expect(out.records).toEqual([
      expect.objectContaining({ msg: 'bound', session: 'bound', phase: 'ready' }),
      expect.objectContaining({ msg: 'explicit', session: 's1', phase: 'mine' }),
    ]);
    for (const line of out.lines) {
      expect(line.match(/"session"/g)).toHaveLength(1);
      expect(line.match(/"phase"/g)).toHaveLength(1);
    }
  });

  it('merges nested contexts, the inner one winning', () => {
    runWithLogContext({ session: 's1', phase: 'ready' }, () => {
      runWithLogContext({ phase: 'ending', step: 3 }, () => {
        expect(logContextFields()).toEqual({ session: 's1', phase: 'ending', step: 3 });
      });
      expect(logContextFields()).toEqual({ session: 's1', phase: 'ready' });
    });
    expect(logContextFields()).toEqual({});
  });

  it('gives no fields, rather than throwing, when a function context throws', () => {
    const out = capturedLogger();
    runWithLogContext(
      () => {
        throw new Error('broken');
      },
      () => out.log.info('still written'),
    );
    expect(out.records).toEqual([expect.objectContaining({ msg: 'still written' })]);
  });

  it("withLogContext: a logger whose records, and its children's, carry the context wherever they are written", () => {
    const out = capturedLogger();
    const sessionLog = withLogContext(out.log.child({ session: 's1' }), () => ({ session: 's1', phase: 'waiting' }));
    sessionLog.info('own');
    sessionLog.child({ connection: 1 }).warn('child');
    out.log.info('other');
    expect(out.records.map((r) => [r['msg'], r['session'], r['phase'], r['connection']])).toEqual([
      ['own', 's1', 'waiting', undefined],
      ['child', 's1', 'waiting', 1],
      ['other', undefined, undefined, undefined],
    ]);
  });
});
