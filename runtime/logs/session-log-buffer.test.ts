import { describe, expect, it } from 'vitest';
import { SessionLogBuffer } from './session-log-buffer.ts';
import { SessionLogRegistry } from './session-log-registry.ts';
import { sessionLogger, REDACTED } from './session-logger.ts';
import { createLogger } from '../../server-kit/log.ts';

const line = (message: string) => ({ level: 'info' as const, source: 'model' as const, message });

describe('SessionLogBuffer', () => {
  it('numbers lines from 1 and pages after a sequence number', () => {
    const buffer = new SessionLogBuffer();
    for (let i = 1; i <= 5; i++) buffer.append(line(`line ${i}`));
    const first = buffer.page(0, 2);
    expect(first.lines.map((l) => l.seq)).toEqual([1, 2]);
    expect(first.next).toBe(2);
    const rest = buffer.page(first.next, 100);
    expect(rest.lines.map((l) => l.message)).toEqual(['line 3', 'line 4', 'line 5']);
    expect(buffer.page(rest.next, 100)).toMatchObject({ lines: [], next: 5, dropped: 0, missed: 0, live: true });
  });

  it('keeps at most maxLines, dropping the oldest and counting them', () => {
    const buffer = new SessionLogBuffer({ maxLines: 10_000 });
    for (let i = 1; i <= 10_250; i++) buffer.append(line(`line ${i}`));
    expect(buffer.size).toBe(10_000);
    expect(buffer.dropped).toBe(250);
    const page = buffer.page(0, 3);
    expect(page.lines.map((l) => l.seq)).toEqual([251, 252, 253]);
    // A reader that had read up to 100 missed 101..250.
    expect(page.missed).toBe(250);
    expect(buffer.page(100, 1)).toMatchObject({ missed: 150, dropped: 250 });
    expect(buffer.page(250, 1).missed).toBe(0);
  });

  it('keeps at most maxBytes (each line counted as its JSON), whichever bound comes first', () => {
    const buffer = new SessionLogBuffer({ maxLines: 10_000, maxBytes: 10 * 1024 * 1024 });
    const big = 'x'.repeat(4000); // ~4.1 KB a line: the byte bound (10 MB) comes before 10,000 lines
    for (let i = 0; i < 3000; i++) buffer.append({ ...line(big), fields: { i } });
    expect(buffer.bytes).toBeLessThanOrEqual(10 * 1024 * 1024);
    expect(buffer.size).toBeLessThan(3000);
    expect(buffer.size + buffer.dropped).toBe(3000);
    expect(buffer.page(0, 1).lines[0]!.seq).toBe(buffer.dropped + 1);
  });

  it('cuts a huge message and always keeps the newest line', () => {
    const buffer = new SessionLogBuffer({ maxBytes: 100 });
    buffer.append(line('a'.repeat(100_000)));
    expect(buffer.size).toBe(1);
    expect(buffer.page(0, 1).lines[0]!.message.length).toBeLessThanOrEqual(4097);
  });

  it('tells live readers each line, and the end', () => {
    const buffer = new SessionLogBuffer();
    const seen: number[] = [];
    const ends: string[] = [];
    buffer.subscribe((l) => seen.push(l.seq));
    buffer.onEnd((reason) => ends.push(reason));
    buffer.append(line('a'));
    buffer.append(line('b'));
    buffer.end('stopped');
    expect(buffer.append(line('late'))).toBeUndefined();
    expect(seen).toEqual([1, 2]);
    expect(ends).toEqual(['stopped']);
    expect(buffer.page(0, 10).live).toBe(false);
    buffer.onEnd((reason) => ends.push(`again ${reason}`));
    expect(ends).toEqual(['stopped', 'again stopped']);
  });
});

describe('SessionLogRegistry', () => {
  it('keeps a finished log for the window on its clock, then answers logs_gone', () => {
    let now = 1_000_000;
    const logs = new SessionLogRegistry({ now: () => now });
    logs.begin('s1').append(line('hello'));
    expect(() => logs.get('nope')).toThrow(expect.objectContaining({ code: 'session_not_found' }));
    logs.ended('s1', 'stopped');
    now += 5 * 60_000;
    expect(logs.get('s1').page(0, 10).lines).toHaveLength(1);
    now += 1;
    expect(() => logs.get('s1')).toThrow(expect.objectContaining({ code: 'logs_gone', status: 410 }));
    logs.close();
  });
});

describe('sessionLogger', () => {
  it('keeps runtime lines with their bindings, without credentials; debug stays out', () => {
    const buffer = new SessionLogBuffer();
    const log = sessionLogger(createLogger({}, 'silent'), buffer, 'runtime').child({ connection: 2 });
    log.debug('detail');
    log.warn('peer failed', { error: new Error('boom'), token: 'eyJ…', upload_signature: 'abc' });
    const [kept] = buffer.page(0, 10).lines;
    expect(buffer.size).toBe(1);
    expect(kept).toMatchObject({ level: 'warn', source: 'runtime', message: 'peer failed' });
    expect(kept!.fields).toMatchObject({
      connection: 2,
      token: REDACTED,
      upload_signature: REDACTED,
      error: { name: 'Error', message: 'boom' },
    });
  });

  it("keeps the model's fields as written", () => {
    const buffer = new SessionLogBuffer();
    sessionLogger(createLogger({}, 'silent'), buffer, 'model').info('step', { token_count: 12 });
    expect(buffer.page(0, 1).lines[0]).toMatchObject({ source: 'model', fields: { token_count: 12 } });
  });
});
