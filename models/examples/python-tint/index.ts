/**
 * python-tint: a model whose inference is Python (numpy), served by the runtime's media engine
 * through the Python worker bridge (docs/python-worker.md). Webcam in (RGBA), tinted video out;
 * without a webcam, a moving pattern in the tint's colour. Its one command, `set_tint`, is
 * declared in model.py with its JSON Schema and validated here before Python sees it.
 *
 *   npx arclight serve models/examples/python-tint
 */

import { definePythonModel } from 'arclight/runtime';

export const WIDTH = 640;
export const HEIGHT = 480;

export default definePythonModel({
  name: 'python-tint',
  description: 'Webcam tint in numpy, through the Python worker bridge',
  module: new URL('./model.py', import.meta.url),
  fps: 30,
  tracks: [
    { name: 'webcam', kind: 'video', direction: 'sendonly', format: 'rgba' },
    { name: 'main_video', kind: 'video', direction: 'recvonly', width: WIDTH, height: HEIGHT },
  ],
  messages: {
    input_started: {
      description: 'The model saw the first webcam frame of the session.',
      schema: { type: 'object', properties: { width: { type: 'integer' }, height: { type: 'integer' } }, required: ['width', 'height'] },
    },
  },
});
