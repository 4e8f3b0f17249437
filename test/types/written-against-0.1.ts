/**
 * Type test: a model, an operator's script and an app written against the 0.1 API, imported by
 * package name as users import them. Compiled by type-tests.test.ts, so a change to what the
 * entries export (issue 23 moved the operator and GPU names to their own entries) cannot break
 * code like this unnoticed: `arclight/runtime` still exports them for 0.1 code.
 */

import { ArclightClient } from 'arclight/client';
import { mintToken } from 'arclight/client/server';
import {
  commandFor,
  CommandError,
  convertToYuv,
  defineModel,
  nativeAddon,
  startRuntime,
  VideoEncoder,
  type RuntimeOptions,
} from 'arclight/runtime';
import { startRuntime as startRuntimeFromOperator, WordListModerator } from 'arclight/runtime/operator';
import { NvencVideoEncoder, type CudaFrame } from 'arclight/runtime/gpu';

interface State {
  color: string;
}

const command = commandFor<State>();

export const model = defineModel({
  name: 'written-against-0-1',
  fps: 30,
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly', width: 64, height: 64 }],
  createSessionState: (): State => ({ color: '#ffffff' }),
  commands: {
    set_color: command({
      params: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'], additionalProperties: false },
      handler: ({ color }, { session }) => {
        if (!color.startsWith('#')) throw new CommandError('invalid_color', 'a #rrggbb colour');
        session.state.color = color;
      },
    }),
  },
  async run(session) {
    const rgb = new Uint8Array(64 * 64 * 3);
    const yuv = convertToYuv(rgb, { width: 64, height: 64, format: 'rgb' });
    await session.emit('main_video', { width: 64, height: 64, format: 'i420', data: yuv });
  },
});

export async function operate(): Promise<void> {
  const options: RuntimeOptions = { model: model as never, port: 0, moderation: { moderator: new WordListModerator(['blocked']) } };
  const runtime = await startRuntime(options);
  await runtime.close();
  const again = await startRuntimeFromOperator(options);
  await again.close();
  const encoder = await VideoEncoder.create({ codec: 'h264', width: 64, height: 64, fps: 30 });
  encoder.close();
  const nvenc: typeof NvencVideoEncoder | undefined = nativeAddon === undefined ? undefined : NvencVideoEncoder;
  const frame: CudaFrame | undefined = undefined;
  void nvenc;
  void frame;
}

export async function app(): Promise<void> {
  const client = new ArclightClient({ modelName: 'written-against-0-1', local: true, localRuntimeUrl: 'http://127.0.0.1:8080' });
  await client.connect();
  await client.sendCommand('set_color', { color: '#00ff00' });
  await client.disconnect();
  void mintToken;
}
