/**
 * `arclight/testing` — unit tests for a model, without a runtime, a network or real time.
 *
 * `createTestSession(model)` runs a session of the model as the runtime would — `load()` once,
 * `createSessionState()`, the hooks, `run(session)` — on a clock that moves only when the test
 * advances it. Commands go through the runtime's own validation and routing, so they fail with
 * the codes a client would see; what the model sends (frames, messages, log lines) is recorded.
 * See docs/model-authors.md, "Testing your model".
 *
 * @example
 * ```ts
 * import { expect, it } from 'vitest';
 * import { createTestSession } from 'arclight/testing';
 * import model from './index.ts';
 *
 * it('changes colour on command', async () => {
 *   await using t = await createTestSession(model);
 *   expect(await t.sendCommand('set_color', { color: '#00ff00' })).toEqual({ type: 'color_changed', data: { color: '#00ff00' } });
 *   await t.advanceFrames(2);
 *   expect(t.frames('main_video')).toHaveLength(2);
 * });
 * ```
 */
export { createTestSession, TestSession, DEFAULT_END_REASON } from './test-session.ts';
export type {
  TestSessionOptions,
  TestMessage,
  TestLogRecord,
  TestCommandReply,
  SendCommandOptions,
  WaitForOptions,
} from './test-session.ts';
