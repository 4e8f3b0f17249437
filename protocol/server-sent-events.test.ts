import { describe, expect, it } from 'vitest';
import { formatServerSentEvent, ServerSentEventParser, SSE_KEEP_ALIVE } from './server-sent-events.ts';

describe('server-sent events', () => {
  it('formats type, id and multi-line data, ending with a blank line', () => {
    expect(formatServerSentEvent({ event: 'log', id: '7', data: '{"a":1}' })).toBe('event: log\nid: 7\ndata: {"a":1}\n\n');
    expect(formatServerSentEvent({ data: 'one\ntwo\r\nthree' })).toBe('data: one\ndata: two\ndata: three\n\n');
    // A newline in the type or id cannot start a forged field.
    expect(formatServerSentEvent({ event: 'x\ndata: forged', data: 'd' })).toBe('event: x data: forged\ndata: d\n\n');
  });

  it('parses what it formats, across arbitrary chunk boundaries, skipping comments', () => {
    const events = [
      { event: 'log', id: '1', data: '{"seq":1,"message":"héllo"}' },
      { event: 'end', data: 'multi\nline' },
      { data: 'plain' },
    ];
    const text = formatServerSentEvent(events[0]!) + SSE_KEEP_ALIVE + formatServerSentEvent(events[1]!) + formatServerSentEvent(events[2]!);
    for (const size of [1, 2, 3, 7, 1000]) {
      const parser = new ServerSentEventParser();
      const got = [];
      for (let i = 0; i < text.length; i += size) got.push(...parser.push(text.slice(i, i + size)));
      // `id` persists to later events, as the standard says (it is the last event id seen).
      expect(got).toEqual([events[0], { ...events[1], id: '1' }, { ...events[2], id: '1' }]);
    }
  });

  it('accepts CRLF and CR line endings, even a CRLF split between chunks', () => {
    const parser = new ServerSentEventParser();
    expect(parser.push('event: a\r\ndata: 1\r')).toEqual([]);
    expect(parser.push('\n\r\ndata: 2\r\r')).toEqual([{ event: 'a', data: '1' }, { data: '2' }]);
  });
});
