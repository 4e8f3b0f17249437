/**
 * Type test: a client typed straight from the model module's definition type
 * (`ModelTypesOf<typeof pattern>`), for apps that can import the model. Compiled by
 * type-tests.test.ts; each `@ts-expect-error` marks code that must not compile.
 */

import { ArclightClient } from '../../client/index.ts';
import type pattern from '../../models/examples/pattern/index.ts';
import type { ModelTypesOf } from '../../runtime/index.ts';
import type { PatternModel } from './pattern-model.d.ts';

type Pattern = ModelTypesOf<typeof pattern>;
declare const client: ArclightClient<Pattern>;

export async function declaredCommands(): Promise<void> {
  const reply = await client.sendCommand('set_color', { color: '#00ff00' });
  const color: string | undefined = reply?.data.color;
  void color;
  await client.sendCommand('set_tone', { frequency: 440 });
  await client.sendCommand('get_state');
  // @ts-expect-error an undeclared command name
  await client.sendCommand('set_colour', { color: '#00ff00' });
  // @ts-expect-error a parameter of the wrong type
  await client.sendCommand('set_speed', { speed: 'fast' });
  // @ts-expect-error a required parameter missing
  await client.sendCommand('set_text', {});
}

export function messages(): void {
  client.on('message', (message) => {
    if (message.type === 'welcome') {
      const frame: number = message.data.frame;
      void frame;
      // @ts-expect-error welcome carries no "color"
      void message.data.color;
    }
  });
}

/** The two routes agree on the command names and parameters. */
export function sameCommands(generated: keyof PatternModel['commands'], derived: keyof Pattern['commands']): void {
  const a: keyof Pattern['commands'] = generated;
  const b: keyof PatternModel['commands'] = derived;
  const params: Pattern['commands']['set_tone']['params'] = {} as PatternModel['commands']['set_tone']['params'];
  void a;
  void b;
  void params;
}
