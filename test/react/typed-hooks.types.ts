/**
 * Type test for the React bindings on a typed model (`ModelTypesOf<typeof echo>`): compiled by
 * `npx tsc --noEmit -p .` (the repository's typecheck), where each `// @ts-expect-error` line must
 * fail to compile (an unused directive is itself an error). Never run.
 */

import type echo from '../../models/examples/echo/index.ts';
import type { ModelTypesOf } from '../../runtime/index.ts';
import { typedHooks, useArclight, useModelMessage, useModelMessages } from '../../client/react/index.ts';

type Echo = ModelTypesOf<typeof echo>;
const typed = typedHooks<Echo>();

export async function typedSendCommand(): Promise<void> {
  const { sendCommand } = typed.useArclight();
  const reply = await sendCommand('set_brightness', { value: 0.5 });
  const brightness: number | undefined = reply?.data.brightness;
  void brightness;
  // @ts-expect-error an undeclared command name
  await sendCommand('set_brighness', { value: 0.5 });
  // @ts-expect-error a parameter of the wrong type
  await sendCommand('set_brightness', { value: 'dim' });
  // @ts-expect-error a required parameter missing
  await sendCommand('set_brightness', {});
  // The type argument works without the factory too.
  const explicit = useArclight<Echo>();
  // @ts-expect-error an undeclared command name
  await explicit.sendCommand('rotate', {});
}

export function typedMessages(): void {
  const [started] = typed.useModelMessages({ type: 'input_started', limit: 1 });
  const width: number | undefined = started?.data.width;
  void width;
  // @ts-expect-error input_started carries no `depth`
  void started?.data.depth;
  // @ts-expect-error the model declares no such message
  typed.useModelMessages({ type: 'input_stopped' });
  typed.useModelMessage('input_started', (message) => {
    const height: number = message.data.height;
    void height;
  });
  // Every message: a union discriminated by `type`.
  for (const message of typed.useModelMessages()) {
    if (message.type === 'brightness_changed') {
      const value: number = message.data.brightness;
      void value;
    }
  }
  // Explicit type arguments on the plain hooks.
  const [again] = useModelMessages<Echo, 'input_started'>({ type: 'input_started' });
  const h: number | undefined = again?.data.height;
  void h;
  useModelMessage<Echo, 'input_started'>('input_started', (message) => void message.data.width);
}

export function untypedStaysOpen(): void {
  // Without a model, any command and message type goes (today's client).
  const { sendCommand } = useArclight();
  void sendCommand('anything', { at: 'all' });
  const [any] = useModelMessages({ type: 'whatever' });
  void any?.data;
}
