/**
 * Every process-log record written while a session's code runs carries the session's id and
 * lifecycle phase (server-kit/log-context.ts), whoever writes it: here a model's command handler
 * writes through its own `session.log` and through a logger it got from elsewhere (a library's,
 * bound to no session), and both lines come out stamped `session` and `phase: ready`; the
 * runtime's own startup line, outside any session, is not. A real runtime in this process with
 * the real logger (JSON into memory), our Node client over loopback.
 */

import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArclightClient } from '../../client/node.ts';
import { command, defineModel, startRuntime, type Runtime } from '../../runtime/index.ts';
import { createLoggerTo } from '../../server-kit/log.ts';
import { waitUntil } from '../support/video-probe.ts';

const LOOPBACK = '127.0.0.1';

const lines: string[] = [];
const records = (): Array<Record<string, unknown>> => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
const processLog = createLoggerTo(
  {
    stream: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  },
  {},
  'info',
);
/** A logger the model did not get from its session: a library's, say. */
const libraryLog = processLog.child({ component: 'some-library' });

const model = defineModel({
  name: 'stamped',
  fps: 10,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }],
  commands: {
    note: command({
      params: { type: 'object', additionalProperties: false } as const,
      async handler(_params, { session }) {
        session.log.info('noted by the model', { n: 1 });
        await new Promise((resolve) => setTimeout(resolve, 5));
        libraryLog.info('noted by a library');
        return undefined;
      },
    }),
  },
  async run(session) {
    const data = new Uint8Array(64 * 64 * 1.5).fill(128);
    for await (const _ of session.ticks()) await session.emit('main_video', { width: 64, height: 64, format: 'i420', data });
  },
});

describe('process-log records of a session', () => {
  let runtime: Runtime;

  beforeAll(async () => {
    runtime = await startRuntime({
      model: model as never,
      port: 0,
      host: LOOPBACK,
      ice: { hostAddresses: [LOOPBACK] },
      playground: false,
      logger: processLog,
    });
    await runtime.loaded;
  });
  afterAll(async () => {
    await runtime?.close();
  });

  it('carry the session id and phase, including records written through a logger bound to no session', async () => {
    const client = new ArclightClient({ modelName: 'stamped', local: true, localRuntimeUrl: runtime.url });
    try {
      await client.connect();
      const sessionId = client.getSessionId()!;
      await client.sendCommand('note', {});
      await waitUntil(() => records().some((r) => r['msg'] === 'noted by a library'), 5_000, 'the library line');
      const model = records().find((r) => r['msg'] === 'noted by the model');
      const library = records().find((r) => r['msg'] === 'noted by a library');
      expect(model).toMatchObject({ session: sessionId, phase: 'ready', source: 'model', n: 1 });
      expect(library).toMatchObject({ session: sessionId, phase: 'ready', component: 'some-library' });
      // Each key once in the line (the session's logger binds `session` itself).
      for (const line of lines.filter((l) => l.includes('noted by'))) expect(line.match(/"session"/g)).toHaveLength(1);
      // Outside any session's work: not stamped.
      expect(records().filter((r) => r['session'] === undefined).length).toBeGreaterThan(0);
      expect(records().some((r) => r['session'] === undefined && r['phase'] !== undefined)).toBe(false);
    } finally {
      await client.disconnect().catch(() => {});
    }
  });
});
