/**
 * The process logger (log.ts): the JSON line operators ship (its keys, levels, child bindings,
 * Errors with stack and cause), the text line a person at a terminal reads, and that a stream
 * whose reader is gone is dropped rather than thrown at (test/runtime/broken-log-pipe.test.ts has
 * the whole process's side of that).
 */

import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger, createLoggerTo, writeStandardStream, type LogDestination } from './log.ts';

/** A stream keeping what is written to it, one string per write. */
function captured(): { stream: Writable; writes: string[]; records: () => Array<Record<string, unknown>> } {
  const writes: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      writes.push(chunk.toString());
      done();
    },
  });
  return { stream, writes, records: () => writes.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('the JSON format', () => {
  it('writes one object per line: time, level, msg, bindings and fields, no pid or hostname', () => {
    const out = captured();
    createLoggerTo({ stream: out.stream }, { process: 'runtime' }, 'debug').info('serving model', { port: 8080, name: 'pattern' });
    expect(out.writes).toHaveLength(1);
    expect(out.writes[0]!.endsWith('}\n')).toBe(true);
    const [record] = out.records();
    expect(Object.keys(record!).sort()).toEqual(['level', 'msg', 'name', 'port', 'process', 'time']);
    expect(record).toMatchObject({ level: 'info', msg: 'serving model', process: 'runtime', port: 8080, name: 'pattern' });
    expect(new Date(record!['time'] as string).toISOString()).toBe(record!['time']);
  });

  it('writes the message as given (no printf-style substitution)', () => {
    const out = captured();
    createLoggerTo({ stream: out.stream }, {}, 'info').info('50%s done %d', { a: 1 });
    expect(out.records()[0]!['msg']).toBe('50%s done %d');
  });

  it('filters by level: below it nothing is written; silent writes nothing at all', () => {
    const out = captured();
    const log = createLoggerTo({ stream: out.stream }, {}, 'warn');
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    expect(out.records().map((r) => [r['level'], r['msg']])).toEqual([
      ['warn', 'w'],
      ['error', 'e'],
    ]);
    const quiet = captured();
    const silent = createLoggerTo({ stream: quiet.stream }, {}, 'silent');
    silent.error('e');
    silent.child({ a: 1 }).error('e');
    expect(quiet.writes).toEqual([]);
  });

  it('takes its level from ARCLIGHT_LOG (default info; an unknown value is info)', () => {
    const levels = (env: string | undefined): string[] => {
      vi.stubEnv('ARCLIGHT_LOG', env);
      const out = captured();
      const log = createLoggerTo({ stream: out.stream });
      log.debug('debug');
      log.info('info');
      log.warn('warn');
      return out.records().map((r) => String(r['level']));
    };
    expect(levels('debug')).toEqual(['debug', 'info', 'warn']);
    expect(levels('warn')).toEqual(['warn']);
    expect(levels('silent')).toEqual([]);
    expect(levels(undefined)).toEqual(['info', 'warn']);
    expect(levels('loud')).toEqual(['info', 'warn']);
  });

  it('adds child bindings to every record, a later binding or a field replacing an earlier one', () => {
    const out = captured();
    const root = createLoggerTo({ stream: out.stream }, { process: 'runtime' }, 'info');
    const child = root.child({ session: 's1', connection: 1 }).child({ connection: 2 });
    child.info('a');
    child.info('b', { connection: 3, extra: true });
    root.info('c');
    expect(out.records()).toEqual([
      expect.objectContaining({ msg: 'a', process: 'runtime', session: 's1', connection: 2 }),
      expect.objectContaining({ msg: 'b', process: 'runtime', session: 's1', connection: 3, extra: true }),
      expect.not.objectContaining({ session: 's1' }),
    ]);
    // Each key once in the line itself, not only after JSON.parse.
    expect(out.writes[1]!.match(/"connection"/g)).toHaveLength(1);
  });

  it('serializes Errors under any key with name, message, stack and cause', () => {
    const out = captured();
    const cause = new TypeError('inner');
    createLoggerTo({ stream: out.stream }, {}, 'info').error('failed', {
      error: new Error('outer', { cause }),
      other: new RangeError('r'),
    });
    const record = out.records()[0]!;
    expect(record['error']).toEqual({
      name: 'Error',
      message: 'outer',
      stack: expect.stringContaining('Error: outer'),
      cause: { name: 'TypeError', message: 'inner', stack: expect.stringContaining('TypeError: inner') },
    });
    expect(record['other']).toMatchObject({ name: 'RangeError', message: 'r' });
  });

  it('never throws on fields it cannot serialize: circular values are marked, a throwing getter leaves a note', () => {
    const out = captured();
    const log = createLoggerTo({ stream: out.stream }, {}, 'info');
    const loop: Record<string, unknown> = {};
    loop['self'] = loop;
    log.info('circular', { loop });
    log.info('throwing', {
      get bad(): unknown {
        throw new Error('no');
      },
    });
    expect(out.records()).toEqual([
      expect.objectContaining({ msg: 'circular', loop: { self: '[Circular]' } }),
      expect.objectContaining({ msg: 'throwing', note: 'fields not serializable' }),
    ]);
  });

  it('writes to process.stderr by default, looked up at each write', () => {
    const written: string[] = [];
    const original = process.stderr.write;
    process.stderr.write = ((chunk: string | Uint8Array) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
    try {
      createLoggerTo({}, {}, 'info').warn('to stderr');
    } finally {
      process.stderr.write = original;
    }
    expect(written.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(['to stderr']);
  });

  it('createLogger writes JSON where stderr is not a terminal', () => {
    vi.stubEnv('ARCLIGHT_LOG_FORMAT', '');
    const written: string[] = [];
    const original = { write: process.stderr.write, isTTY: process.stderr.isTTY };
    process.stderr.write = ((chunk: string | Uint8Array) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
    process.stderr.isTTY = false;
    try {
      createLogger({ process: 'x' }, 'info').info('hello');
    } finally {
      process.stderr.write = original.write;
      process.stderr.isTTY = original.isTTY;
    }
    expect(JSON.parse(written[0]!)).toMatchObject({ level: 'info', msg: 'hello', process: 'x' });
  });
});

describe('the text format', () => {
  const text = (destination: Omit<LogDestination, 'stream'>): { lines: string[]; log: ReturnType<typeof createLoggerTo> } => {
    const out = captured();
    return { lines: out.writes, log: createLoggerTo({ ...destination, stream: out.stream }, { process: 'x' }, 'debug') };
  };

  it('writes HH:MM:SS.mmm LEVEL message key=value, quoting values with spaces', () => {
    const { lines, log } = text({ format: 'text' });
    log.info('hello', { a: 1, b: 'two words', c: 'one', d: { e: [1, 2] }, f: null });
    expect(lines).toEqual([
      expect.stringMatching(/^\d\d:\d\d:\d\d\.\d{3} INFO  hello process=x a=1 b="two words" c=one d=\{"e":\[1,2\]\} f=null\n$/),
    ]);
  });

  it("puts an error's message on the line and its stack, then its cause's, on indented lines below", () => {
    const { lines, log } = text({ format: 'text' });
    log.error('failed', { error: new Error('outer', { cause: new Error('inner') }) });
    const [first, ...rest] = lines[0]!.trimEnd().split('\n');
    expect(first).toMatch(/ ERROR failed process=x error=outer$/);
    expect(rest[0]).toBe('    Error: outer');
    expect(rest[1]).toMatch(/^ {8}at /);
    expect(rest).toContain('    caused by: Error: inner');
  });

  it('colours only when asked (a terminal): level and keys; plain otherwise', () => {
    const plain = text({ format: 'text', colour: false });
    plain.log.warn('careful', { a: 1 });
    expect(plain.lines[0]).not.toContain('\u001b[');
    const coloured = text({ format: 'text', colour: true });
    coloured.log.warn('careful', { a: 1 });
    expect(coloured.lines[0]).toContain('\u001b[33mWARN \u001b[0m');
    expect(coloured.lines[0]).toContain('careful');
  });
});

describe('a stream whose reader is gone', () => {
  it('is written no more after its first failure, and the logger never throws', async () => {
    let attempts = 0;
    const broken = new Writable({
      write(_chunk, _encoding, done) {
        attempts++;
        done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    });
    const log = createLoggerTo({ stream: broken }, {}, 'info');
    expect(() => log.info('first')).not.toThrow();
    // The 'error' event comes on a later tick: the guard's listener marks the stream broken.
    await new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 5; i++) expect(() => log.error('again', { i })).not.toThrow();
    expect(attempts).toBe(1);
    expect(broken.listeners('error')).toHaveLength(1);
  });

  it('is skipped once destroyed; a write that throws marks it broken', () => {
    let attempts = 0;
    const throwing = {
      write: () => {
        attempts++;
        throw new Error('EPIPE');
      },
      listeners: () => [],
      on: () => undefined,
      destroyed: false,
    } as unknown as Writable;
    writeStandardStream(throwing, 'a\n');
    writeStandardStream(throwing, 'b\n');
    expect(attempts).toBe(1);
    const destroyed = captured();
    destroyed.stream.destroy();
    writeStandardStream(destroyed.stream, 'c\n');
    expect(destroyed.writes).toEqual([]);
  });
});
