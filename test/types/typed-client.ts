/**
 * Type test: a client typed by `arclight types` output (pattern-model.d.ts, generated from the
 * pattern example). Compiled by type-tests.test.ts; each `@ts-expect-error` marks code that must
 * not compile.
 */

import { ArclightClient } from '../../client/index.ts';
import type { PatternModel } from './pattern-model.d.ts';

declare const client: ArclightClient<PatternModel>;

export async function declaredCommands(): Promise<void> {
  const reply = await client.sendCommand('set_color', { color: '#00ff00' });
  if (reply) {
    const type: 'color_changed' = reply.type;
    const color: string = reply.data.color;
    void type;
    void color;
  }
  const ack: undefined = await client.sendCommand('set_speed', { speed: 4 });
  void ack;
  await client.sendCommand('set_tone', { frequency: 440 }); // volume is optional
  await client.sendCommand('get_state'); // no required params: data may be left out
  await client.sendCommand('get_state', {});
}

export async function wrongCommands(): Promise<void> {
  // @ts-expect-error an undeclared command name
  await client.sendCommand('set_colour', { color: '#00ff00' });
  // @ts-expect-error a parameter of the wrong type
  await client.sendCommand('set_speed', { speed: 'fast' });
  // @ts-expect-error a required parameter missing
  await client.sendCommand('set_tone', { volume: 0.5 });
  // @ts-expect-error data left out while a parameter is required
  await client.sendCommand('set_color');
  // @ts-expect-error an unknown parameter (the schema says additionalProperties: false)
  await client.sendCommand('set_speed', { speed: 1, sped: 2 });
  // @ts-expect-error get_state takes no parameters
  await client.sendCommand('get_state', { verbose: true });
  const reply = await client.sendCommand('set_color', { color: '#00ff00' });
  // @ts-expect-error the reply may be undefined (an acknowledgement)
  void reply.data;
  // @ts-expect-error set_color's reply has no field "colour"
  void reply?.data.colour.length;
}

export function messages(): void {
  client.on('message', (message) => {
    // @ts-expect-error not a declared message or reply type
    if (message.type === 'welcom') return;
    switch (message.type) {
      case 'welcome': {
        const frame: number = message.data.frame;
        const model: 'pattern' = message.data.model;
        void frame;
        void model;
        // @ts-expect-error welcome carries no "color"
        void message.data.color;
        break;
      }
      case 'color_changed': {
        const color: string = message.data.color;
        void color;
        break;
      }
      case 'state':
        void message.data.speed;
        break;
    }
    // @ts-expect-error data depends on the type: narrow it first (welcome has no "color")
    void message.data.color;
  });
  client.on('warning', (warning) => {
    const code: 'schema_drift' = warning.code;
    void code;
  });
}
