/**
 * Which format the process log takes (log-format.ts): text on a terminal, JSON into a pipe or a
 * file, ARCLIGHT_LOG_FORMAT overriding either way, colours only on a terminal — decided from the
 * isTTY answer given, not the terminal this test happens to run in.
 */

import { describe, expect, it } from 'vitest';
import { formatTextRecord, logStyleFor } from './log-format.ts';

describe('the log style', () => {
  it('is coloured text on a terminal and JSON elsewhere', () => {
    expect(logStyleFor(true, {})).toEqual({ format: 'text', colour: true });
    expect(logStyleFor(false, {})).toEqual({ format: 'json', colour: false });
  });

  it('follows ARCLIGHT_LOG_FORMAT: json on a terminal, text (uncoloured) into a pipe', () => {
    expect(logStyleFor(true, { ARCLIGHT_LOG_FORMAT: 'json' })).toEqual({ format: 'json', colour: false });
    expect(logStyleFor(false, { ARCLIGHT_LOG_FORMAT: 'text' })).toEqual({ format: 'text', colour: false });
    expect(logStyleFor(true, { ARCLIGHT_LOG_FORMAT: 'text' })).toEqual({ format: 'text', colour: true });
    expect(logStyleFor(false, { ARCLIGHT_LOG_FORMAT: 'fancy' })).toEqual({ format: 'json', colour: false });
  });

  it('has no colours with NO_COLOR set', () => {
    expect(logStyleFor(true, { NO_COLOR: '1' })).toEqual({ format: 'text', colour: false });
  });
});

describe('a text line', () => {
  it('shows the local time of day, the level, the message, then every other key', () => {
    const time = new Date(2026, 0, 2, 3, 4, 5, 67);
    const line = formatTextRecord(
      { level: 'debug', time: time.toISOString(), session: 'abc', phase: 'ready', msg: 'step', ms: 1.5, ok: true },
      false,
    );
    expect(line).toBe('03:04:05.067 DEBUG step session=abc phase=ready ms=1.5 ok=true\n');
  });

  it('quotes what is not one plain word', () => {
    const line = formatTextRecord(
      { level: 'info', time: new Date().toISOString(), msg: 'm', a: '', b: 'x=y', c: 'say "hi"', d: 'tab\there' },
      false,
    );
    expect(line.trimEnd().slice(line.indexOf(' m ') + 3)).toBe('a="" b="x=y" c="say \\"hi\\"" d="tab\\there"');
  });

  it('shows an error without a stack by its name and message', () => {
    const line = formatTextRecord(
      { level: 'error', time: new Date().toISOString(), msg: 'm', error: { name: 'TypeError', message: 'bad thing' } },
      false,
    );
    expect(line.split('\n')).toEqual([expect.stringMatching(/ ERROR m error="bad thing"$/), '    TypeError: bad thing', '']);
  });
});
