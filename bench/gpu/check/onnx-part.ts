/**
 * Part (d): onnxruntime-node's CUDA execution provider with the `stylise` example's network
 * (models/examples/stylise), against the CPU provider as the baseline: ms per `session.run()` at
 * 256² and 512² on a webcam-sized picture's tensor. onnxruntime-node ships only the CPU provider in
 * its npm package; its install script downloads the CUDA provider's libraries from NuGet, which
 * this project skips (package.json allowScripts) and a host with no network cannot do. When they
 * are missing the part says so, with ORT's own error, and records exactly what would be needed.
 * Also recorded, for information: the Python onnxruntime on the host and its providers.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { yuvByteLength } from '../../../runtime/media/colour-convert.ts';
import { frameToTensor } from '../../../models/examples/stylise/frame-tensor.ts';
import { buildStyliseNetwork, STYLISE_IO } from '../../../models/examples/stylise/stylise-network.ts';
import { median } from '../../support/measure.ts';
import { errorMessage, round, type CheckReport } from './record.ts';

const SIZES = [256, 512] as const;
const CAMERA = { width: 640, height: 480 };
const CUDA_PROVIDER_LIBRARIES = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'] as const;
/**
 * What the CUDA provider of onnxruntime-node 1.30.0 needs, as its install script
 * (node_modules/onnxruntime-node/script/install-metadata.js, manifest `linux/x64:cuda12`) and the
 * CUDA execution provider's requirements page state it.
 */
const CUDA_PROVIDER_NEEDS =
  'libonnxruntime_providers_cuda.so + libonnxruntime_providers_shared.so (+ libonnxruntime_providers_tensorrt.so) in ' +
  'node_modules/onnxruntime-node/bin/napi-v6/linux/x64/: onnxruntime-node\'s postinstall (script/install.js, manifest "linux/x64:cuda12") ' +
  'takes them from the NuGet package Microsoft.ML.OnnxRuntime.Gpu.Linux 1.30.0 (feed https://api.nuget.org/v3/index.json, ' +
  'paths runtimes/linux-x64/native/*.so) — a download, skipped by this project (package.json allowScripts) and impossible offline; ' +
  'and at run time the CUDA 12 libraries the cuda12 build links (libcudart.so.12, libcublas.so.12, libcublasLt.so.12, libcufft.so.11, ' +
  'libcurand.so.10) and cuDNN 9 (libcudnn.so.9) on the loader path; CUDA 13 libraries (other sonames: .so.13) do not satisfy it.';
/** Libraries a CUDA 12 build of the provider loads, looked for on the host (informative). */
const CUDA12_LIBRARIES = ['libcudart.so.12', 'libcublas.so.12', 'libcublasLt.so.12', 'libcufft.so.11', 'libcurand.so.10', 'libcudnn.so.9'];

type Ort = typeof import('onnxruntime-node');

function cameraFrame(): Uint8Array {
  const { width, height } = CAMERA;
  const data = new Uint8Array(yuvByteLength(width, height));
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data[y * width + x] = 16 + ((x + y) % 220);
  data.fill(128, width * height);
  return data;
}

function run(file: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { encoding: 'utf8', timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${error.message.split('\n')[0]}${stderr ? `: ${stderr.trim().split('\n').slice(-3).join(' / ')}` : ''}`));
      else resolve(stdout.trim());
    });
  });
}

/**
 * Where each CUDA 12 / cuDNN 9 library is on this host: ldconfig's cache, else a search of /usr and
 * /opt (CUDA toolkits, Python's nvidia-* wheels under site-packages/nvidia/); 'missing' if neither.
 */
async function findCuda12Libraries(): Promise<Record<string, string>> {
  const cache = await run('ldconfig', ['-p'], 10_000).catch(() => '');
  const names = CUDA12_LIBRARIES.flatMap((lib, i) => [...(i ? ['-o'] : []), '-name', lib]);
  // What find printed, even when it exits non-zero (an unreadable folder) or runs out of time.
  const searched = await new Promise<string>((resolve) => {
    execFile(
      'find',
      ['/usr', '/opt', '-maxdepth', '10', '(', ...names, ')'],
      { encoding: 'utf8', timeout: 30_000, maxBuffer: 4 << 20 },
      (_error, stdout) => resolve(stdout ?? ''),
    );
  });
  const found: Record<string, string> = {};
  for (const lib of CUDA12_LIBRARIES) {
    const inCache = new RegExp(`^\\s*${lib.replace(/\./g, '\\.')} .*=> (\\S+)$`, 'm').exec(cache)?.[1];
    found[lib] = inCache ?? searched.split('\n').find((line) => line.endsWith(`/${lib}`)) ?? 'missing';
  }
  return found;
}

async function timeSession(ort: Ort, provider: string, network: Uint8Array, frames: number): Promise<Record<string, number>> {
  const session = await ort.InferenceSession.create(network, { executionProviders: [provider] });
  try {
    const camera = { ...CAMERA, format: 'i420' as const, data: cameraFrame() };
    const out: Record<string, number> = {};
    for (const size of SIZES) {
      const tensor = frameToTensor(camera, size);
      const feeds = {
        [STYLISE_IO.image]: new ort.Tensor('float32', tensor, [1, 3, size, size]),
        [STYLISE_IO.strength]: new ort.Tensor('float32', Float32Array.of(0.8), [1]),
      };
      await session.run(feeds); // warm
      const times: number[] = [];
      for (let i = 0; i < frames; i++) {
        const t = performance.now();
        await session.run(feeds);
        times.push(performance.now() - t);
      }
      out[`ms${size}`] = round(median(times), 3);
      out[`fps${size}`] = round(1000 / median(times), 1);
    }
    return out;
  } finally {
    await session.release();
  }
}

export async function runOnnxPart(report: CheckReport, options: { frames: number }): Promise<void> {
  let ort: Ort;
  try {
    ort = await import('onnxruntime-node');
  } catch (error) {
    report.record('onnx', 'onnxruntime-node', 'unavailable', {
      error: `onnxruntime-node does not load here: ${errorMessage(error)}`,
      needed: "the bundle's ort.tar.xz (scripts/bundle-gpu-check.mjs) or npm install",
    });
    await recordPython(report);
    return;
  }
  const packageDir = dirname(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'));
  const binDir = join(packageDir, 'bin', 'napi-v6', process.platform, process.arch);
  const libraries = Object.fromEntries(CUDA_PROVIDER_LIBRARIES.map((lib) => [lib, existsSync(join(binDir, lib))]));
  report.record('onnx', 'onnxruntime-node', 'ok', {
    version: (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version,
    listedBackends: ort.listSupportedBackends().map((b) => b.name),
    providerLibraries: libraries,
    binDir,
  });

  const network = buildStyliseNetwork();
  const frames = Math.max(3, Math.min(options.frames, 30));
  try {
    report.record('onnx', 'cpu provider', 'ok', { frames, ...(await timeSession(ort, 'cpu', network, frames)) });
  } catch (error) {
    report.record('onnx', 'cpu provider', 'failed', { error: errorMessage(error) });
  }
  try {
    report.record('onnx', 'cuda provider', 'ok', { frames, ...(await timeSession(ort, 'cuda', network, frames)) });
  } catch (error) {
    const missing = CUDA_PROVIDER_LIBRARIES.filter((lib) => !libraries[lib]);
    let linked: string | undefined;
    if (missing.length === 0) {
      // The provider is there but did not load: which of its libraries the loader cannot find.
      linked = await run('ldd', [join(binDir, 'libonnxruntime_providers_cuda.so')], 10_000).then(
        (out) =>
          out
            .split('\n')
            .filter((l) => l.includes('not found'))
            .map((l) => l.trim())
            .join('; ') || 'ldd finds every library',
        (e: unknown) => `ldd failed: ${errorMessage(e)}`,
      );
    }
    report.record('onnx', 'cuda provider', 'unavailable', {
      error: errorMessage(error),
      missingProviderLibraries: missing,
      unresolvedByLoader: linked,
      cuda12Libraries: await findCuda12Libraries(),
      needed: CUDA_PROVIDER_NEEDS,
    });
  }
  await recordPython(report);
}

/** The host's Python onnxruntime and its providers, if there is a python3 (informative). */
async function recordPython(report: CheckReport): Promise<void> {
  try {
    const out = await run('python3', ['-c', 'import onnxruntime as o; print(o.__version__, o.get_available_providers())'], 60_000);
    report.record('onnx', 'python onnxruntime (informative)', 'ok', { output: out });
  } catch (error) {
    report.record('onnx', 'python onnxruntime (informative)', 'unavailable', { error: errorMessage(error) });
  }
}
