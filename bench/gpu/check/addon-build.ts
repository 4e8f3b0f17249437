/**
 * Builds the native addon from the working tree with plain CMake, the way cmake-js would
 * (CMakeLists.txt builds the addon when CMAKE_JS_VERSION is set, with CMAKE_JS_INC as its include
 * path), so a GPU host needs cmake and a C++ compiler but neither cmake-js nor node_modules. The
 * build goes to its own folder, never build/ (which the test suite loads), and the NVENC headers
 * come from /usr/include/ffnvcodec or $ARCLIGHT_FFNVCODEC_DIR (the bundle carries them).
 *
 * Header locations, first found wins: $ARCLIGHT_NAPI_INCLUDE_DIR / $ARCLIGHT_NODE_ADDON_API_DIR
 * (set by the bundle's run.sh), else the node-api-headers and node-addon-api packages.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';

export interface AddonBuildResult {
  /** The built arclight_native.node. */
  readonly addonPath: string;
  readonly configureSeconds: number;
  readonly compileSeconds: number;
  /** CMake found the ffnvcodec headers and compiled the NVENC encoder in. */
  readonly nvencCompiledIn: boolean;
  readonly ffnvcodecIncludeDir: string | undefined;
  readonly jobs: number;
  readonly compiler: string;
  /** What the built addon says of itself, loaded in a separate process. */
  readonly loadCheck: { readonly version: string; readonly features: Readonly<Record<string, boolean>> };
}

export class AddonBuildError extends Error {
  override readonly name = 'AddonBuildError';
  /** The last lines of the failing command's output. */
  readonly outputTail: string;

  constructor(message: string, outputTail: string) {
    super(message);
    this.outputTail = outputTail;
  }
}

interface RunOutput {
  readonly stdout: string;
  readonly stderr: string;
}

function run(file: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<RunOutput> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, encoding: 'utf8', timeout: Math.round(timeoutMs), maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      if (error) {
        const tail = `${stdout}\n${stderr}`.trim().split('\n').slice(-40).join('\n');
        reject(new AddonBuildError(`${file} ${args.join(' ')}: ${error.message.split('\n')[0]}`, tail));
      } else resolve({ stdout, stderr });
    });
  });
}

/** The folder holding node_api.h, and node-addon-api's folder (napi.h). */
export function nodeApiHeaderDirs(): { napiInclude: string; nodeAddonApi: string } {
  const require = createRequire(import.meta.url);
  const fromPackage = (name: string): string => {
    try {
      return dirname(require.resolve(`${name}/package.json`));
    } catch {
      throw new Error(
        `${name} is not installed here (npm install), and no ${name === 'node-api-headers' ? '$ARCLIGHT_NAPI_INCLUDE_DIR' : '$ARCLIGHT_NODE_ADDON_API_DIR'} names its headers`,
      );
    }
  };
  const napiInclude = process.env['ARCLIGHT_NAPI_INCLUDE_DIR'] ?? join(fromPackage('node-api-headers'), 'include');
  const nodeAddonApi = process.env['ARCLIGHT_NODE_ADDON_API_DIR'] ?? fromPackage('node-addon-api');
  if (!existsSync(join(napiInclude, 'node_api.h'))) throw new Error(`no node_api.h in ${napiInclude}`);
  if (!existsSync(join(nodeAddonApi, 'napi.h'))) throw new Error(`no napi.h in ${nodeAddonApi}`);
  return { napiInclude, nodeAddonApi };
}

/**
 * The folder that holds `ffnvcodec/nvEncodeAPI.h` (what CMakeLists.txt's find_path looks for), or
 * undefined when the headers are not here: the addon then builds without NVENC.
 */
export function ffnvcodecIncludeDir(): string | undefined {
  const named = process.env['ARCLIGHT_FFNVCODEC_DIR'];
  const candidates = named ? [named] : ['/usr/include/ffnvcodec'];
  for (const dir of candidates) {
    if (existsSync(join(dir, 'nvEncodeAPI.h')) && existsSync(join(dir, 'dynlink_cuda.h'))) {
      // $ARCLIGHT_FFNVCODEC_DIR names the ffnvcodec folder itself (as the fake driver's build reads it).
      if (dir.replace(/\/+$/, '').endsWith('/ffnvcodec')) return dirname(dir.replace(/\/+$/, ''));
      throw new Error(`$ARCLIGHT_FFNVCODEC_DIR (${dir}) must be a folder named ffnvcodec: CMake includes <ffnvcodec/nvEncodeAPI.h>`);
    }
  }
  return undefined;
}

/**
 * Configures and builds the addon from `sourceDir` (the repository root) into `buildDir`, then
 * loads it in a child process to see that it is an addon. Throws AddonBuildError with the
 * output's tail when a step fails.
 */
export async function buildAddon(sourceDir: string, buildDir: string, options: { timeoutMs: number }): Promise<AddonBuildResult> {
  const deadline = Date.now() + options.timeoutMs;
  const left = (): number => Math.max(1_000, deadline - Date.now());
  const { napiInclude, nodeAddonApi } = nodeApiHeaderDirs();
  const ffnvcodec = ffnvcodecIncludeDir();
  const outputDir = join(buildDir, 'Release');
  mkdirSync(outputDir, { recursive: true });
  const compiler = (
    await run(process.env['CXX'] ?? 'c++', ['--version'], sourceDir, 10_000).catch(() => ({ stdout: 'no c++ on PATH', stderr: '' }))
  ).stdout
    .split('\n')[0]!
    .trim();

  const configureStarted = performance.now();
  const configure = await run(
    'cmake',
    [
      '-S',
      sourceDir,
      '-B',
      buildDir,
      '-DCMAKE_BUILD_TYPE=Release',
      // What cmake-js passes (build/CMakeCache.txt after `npm install`); CMAKE_JS_SRC and
      // CMAKE_JS_LIB are empty on Linux (Node's symbols resolve from the process at load).
      '-DCMAKE_JS_VERSION=gpu-check',
      `-DCMAKE_JS_INC=${napiInclude};${nodeAddonApi}`,
      '-DCMAKE_JS_SRC=',
      '-DCMAKE_JS_LIB=',
      '-DCMAKE_CXX_FLAGS=-DBUILDING_NODE_EXTENSION',
      `-DCMAKE_LIBRARY_OUTPUT_DIRECTORY=${outputDir}`,
      // Set explicitly each time: CMake caches a find_path result, found or not.
      ...(ffnvcodec ? [`-DFFNVCODEC_INCLUDE_DIR=${ffnvcodec}`] : ['-UFFNVCODEC_INCLUDE_DIR']),
    ],
    sourceDir,
    left(),
  );
  const configureSeconds = (performance.now() - configureStarted) / 1000;
  const nvencCompiledIn = /arclight: NVENC compiled in/.test(configure.stdout);

  const jobs = os.availableParallelism();
  const compileStarted = performance.now();
  await run('cmake', ['--build', buildDir, '--target', 'arclight_native', '-j', String(jobs)], sourceDir, left());
  const compileSeconds = (performance.now() - compileStarted) / 1000;

  const addonPath = join(outputDir, 'arclight_native.node');
  if (!existsSync(addonPath)) throw new AddonBuildError(`the build finished without ${addonPath}`, '');
  // In a child: a library that fails to load must not be this process's addon.
  const probe = await run(
    process.execPath,
    [
      '-e',
      'const a = require(process.argv[1]); process.stdout.write(JSON.stringify({ version: a.version(), features: a.features() }))',
      addonPath,
    ],
    sourceDir,
    Math.min(left(), 30_000),
  );
  const loadCheck = JSON.parse(probe.stdout) as AddonBuildResult['loadCheck'];
  return { addonPath, configureSeconds, compileSeconds, nvencCompiledIn, ffnvcodecIncludeDir: ffnvcodec, jobs, compiler, loadCheck };
}
