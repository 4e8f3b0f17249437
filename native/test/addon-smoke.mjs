// Smoke test of the built addon from Node (no test framework, so it runs with plain `node`):
// every format/layout/target/sample type at odd sizes against a float64 JS reference (within
// 1 LSB), and argument validation throwing TypeError/RangeError rather than crashing.
// Usage: node native/test/addon-smoke.mjs [path/to/arclight_native.node]
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const addon = require(process.argv[2] ?? '../../build/Release/arclight_native.node');

function reference(src, w, h, format, layout, scale, target) {
  const c = format === 'rgba' ? 4 : 3;
  const [ri, bi] = format === 'bgr' ? [2, 0] : [0, 2];
  const norm = (v) => (src instanceof Float32Array ? Math.min(255, Math.max(0, (v * 255) / scale)) : v);
  const at = (x, y, ch) => norm(layout === 'hwc' ? src[(y * w + x) * c + ch] : src[ch * w * h + y * w + x]);
  const rc = (v) => Math.min(255, Math.max(0, Math.round(v)));
  const cw = Math.ceil(w / 2), ch = Math.ceil(h / 2);
  const out = new Uint8Array(w * h + 2 * cw * ch);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++)
      out[y * w + x] = rc(16 + (65.738 * at(x, y, ri) + 129.057 * at(x, y, 1) + 25.064 * at(x, y, bi)) / 256);
  for (let by = 0; by < ch; by++)
    for (let bx = 0; bx < cw; bx++) {
      let r = 0, g = 0, b = 0, n = 0;
      for (let y = 2 * by; y < Math.min(h, 2 * by + 2); y++)
        for (let x = 2 * bx; x < Math.min(w, 2 * bx + 2); x++) (r += at(x, y, ri)), (g += at(x, y, 1)), (b += at(x, y, bi)), n++;
      (r /= n), (g /= n), (b /= n);
      const u = rc(128 + (-37.945 * r - 74.494 * g + 112.439 * b) / 256);
      const v = rc(128 + (112.439 * r - 94.154 * g - 18.285 * b) / 256);
      const k = by * cw + bx;
      if (target === 'i420') (out[w * h + k] = u), (out[w * h + cw * ch + k] = v);
      else (out[w * h + 2 * k] = u), (out[w * h + 2 * k + 1] = v);
    }
  return out;
}

const yuvSize = (w, h) => w * h + 2 * Math.ceil(w / 2) * Math.ceil(h / 2);
let cases = 0, worst = 0;
for (const [w, h] of [[1, 1], [3, 5], [17, 9], [64, 33], [101, 77]])
  for (const format of ['rgb', 'rgba', 'bgr'])
    for (const layout of ['hwc', 'chw'])
      for (const target of ['i420', 'nv12'])
        for (const [type, scale] of [['u8', 1], ['f32', 1], ['f32', 255]]) {
          const n = w * h * (format === 'rgba' ? 4 : 3);
          const src = type === 'u8' ? new Uint8Array(n) : new Float32Array(n);
          for (let i = 0; i < n; i++) src[i] = type === 'u8' ? (Math.random() * 256) | 0 : (Math.random() * 1.2 - 0.1) * scale;
          const dst = new Uint8Array(yuvSize(w, h));
          assert.equal(addon.convertToYuv(src, dst, w, h, format, layout, scale, target, 3), undefined);
          const want = reference(src, w, h, format, layout, scale, target);
          for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(dst[i] - want[i]));
          cases++;
        }
assert.ok(worst <= 1, `worst difference ${worst} LSB`);

const ok = [new Uint8Array(12), new Uint8Array(6), 2, 2, 'rgb', 'hwc', 1, 'i420', 1];
const call = (i, v) => addon.convertToYuv(...ok.map((a, j) => (j === i ? v : a)));
call(-1);
const bad = [
  [0, new Uint16Array(12), TypeError], [0, [1, 2, 3], TypeError], [0, new Uint8Array(11), RangeError],
  [1, new Float32Array(6), TypeError], [1, new Uint8Array(7), RangeError], [2, 0, RangeError],
  [2, 16385, RangeError], [2, 2.5, TypeError], [2, '2', TypeError], [4, 'rgbx', TypeError], [4, 3, TypeError],
  [5, 'nchw', TypeError], [7, 'yuv444', TypeError], [8, 0, TypeError], [8, 1.5, TypeError], [8, undefined, TypeError],
];
for (const [i, v, type] of bad) assert.throws(() => call(i, v), type, `argument ${i} = ${String(v)}`);
assert.throws(() => addon.convertToYuv(new Float32Array(12), new Uint8Array(6), 2, 2, 'rgb', 'hwc', 2, 'i420', 1), TypeError);
assert.throws(() => addon.convertToYuv(), TypeError);
assert.equal(typeof addon.version(), 'string');
const features = addon.features();
assert.equal(features.colourConvert, true);
assert.equal(typeof features.nvenc, 'boolean');
// CI installs the NVENC headers (libffmpeg-nvenc-dev): there the encoder must be compiled in.
if (process.env.CI) assert.equal(features.nvenc, true, 'NVENC compiled out on CI: are the ffnvcodec headers installed?');
for (const name of ['nvencProbe', 'openNvencEncoder', 'CudaBuffer']) assert.equal(typeof addon[name], 'function', name);
console.log(`addon ${addon.version()}: ${cases} conversions within ${worst} LSB of the float64 reference; validation ok`);
