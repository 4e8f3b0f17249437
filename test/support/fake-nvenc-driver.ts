/**
 * The fake NVIDIA driver pair for tests on machines with no GPU (a TEST DOUBLE, see
 * native/test/fake-driver/): `libcuda.so.1` (host memory posing as device memory) and
 * `libnvidia-encode.so.1` (NVENC API 11.1 whose H.264 output is a real, decodable I_PCM stream
 * and whose HEVC output is a non-decodable marker). Point the encoder at them with
 * ARCLIGHT_LIBCUDA / ARCLIGHT_LIBNVIDIA_ENCODE (`fakeNvencEnv()` builds that environment).
 *
 * `buildFakeNvencDriver()` compiles both libraries from source once per machine: into a temp
 * directory named by a hash of the sources and flags, so the test files (each its own process)
 * share one build; the first call in a process starts it, later calls share its promise. Needs a C++17 compiler (`$CXX`, default `c++`) and the ffnvcodec
 * headers (Debian package libffmpeg-nvenc-dev, in /usr/include/ffnvcodec, or
 * $ARCLIGHT_FFNVCODEC_DIR); throws saying which is missing.
 *
 * Fake-driver environment (read at each call, so it may change between sessions):
 *   ARCLIGHT_FAKE_CUDA_DEVICES  device count (default 1)
 *   ARCLIGHT_FAKE_CUDA_INIT     'fail' → cuInit returns CUDA_ERROR_NO_DEVICE (100)
 *   ARCLIGHT_FAKE_NVENC_MODE    'ok' | 'no-encoder' (NV_ENC_ERR_UNSUPPORTED_DEVICE, as a real H200 answers)
 *                               | 'no-hevc' (H.264 only)
 *   ARCLIGHT_FAKE_NVENC_LOG     a file receiving one JSON object per line (`readFakeNvencLog()`)
 *   ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES  N (fault injection): once the process has encoded N
 *                               pictures, every encode fails with NV_ENC_ERR_DEVICE_NOT_EXIST (the
 *                               GPU lost mid-stream); sessions still open
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants as fsConstants, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface FakeNvencDriver {
  /** The directory holding both libraries (a per-machine cache in the temp directory). */
  readonly dir: string;
  /** Absolute path of the fake libcuda.so.1 (its SONAME too). */
  readonly libcuda: string;
  /** Absolute path of the fake libnvidia-encode.so.1 (its SONAME too). */
  readonly libnvidiaEncode: string;
}

const SOURCES = {
  libcuda: fileURLToPath(new URL('../../native/test/fake-driver/fake_cuda.cc', import.meta.url)),
  libnvidiaEncode: fileURLToPath(new URL('../../native/test/fake-driver/fake_nvenc.cc', import.meta.url)),
} as const;

let building: Promise<FakeNvencDriver> | undefined;

/** Builds (once per process) and returns the fake driver libraries. */
export function buildFakeNvencDriver(): Promise<FakeNvencDriver> {
  building ??= build();
  // A failed build is not cached: a later call (after installing what was missing) tries again.
  building.catch(() => {
    building = undefined;
  });
  return building;
}

/**
 * Builds the fake driver and points this process at it (ARCLIGHT_LIBCUDA, ARCLIGHT_LIBNVIDIA_ENCODE,
 * and the fake's log at `log`, emptied first). Call before anything loads the driver: the addon
 * loads it once per process (vitest runs each test file in its own).
 */
export async function installFakeNvencDriver(log: string): Promise<FakeNvencDriver> {
  const driver = await buildFakeNvencDriver();
  Object.assign(process.env, fakeNvencEnv(driver, { log }));
  rmSync(log, { force: true });
  return driver;
}

async function build(): Promise<FakeNvencDriver> {
  const headers = process.env.ARCLIGHT_FFNVCODEC_DIR ?? '/usr/include/ffnvcodec';
  try {
    accessSync(join(headers, 'nvEncodeAPI.h'), fsConstants.R_OK);
    accessSync(join(headers, 'dynlink_cuda.h'), fsConstants.R_OK);
  } catch {
    throw new Error(
      `fake NVENC driver: the ffnvcodec headers are missing (no ${join(headers, 'nvEncodeAPI.h')} / dynlink_cuda.h): ` +
        'apt-get install libffmpeg-nvenc-dev, or set ARCLIGHT_FFNVCODEC_DIR',
    );
  }
  const cxx = process.env.CXX ?? 'c++';
  try {
    await run(cxx, ['--version']);
  } catch (err) {
    throw new Error(`fake NVENC driver: no C++ compiler (\`${cxx} --version\` failed: ${(err as Error).message}); install g++ or set CXX`);
  }

  const flags = ['-std=c++17', '-O1', '-shared', '-fPIC', '-fvisibility=hidden', `-I${headers}`];
  const hash = createHash('sha256').update(JSON.stringify([cxx, flags]));
  for (const source of Object.values(SOURCES)) hash.update(readFileSync(source));
  const dir = join(tmpdir(), `arclight-fake-nvenc-${hash.digest('hex').slice(0, 16)}`);
  const inDir = (d: string): FakeNvencDriver => ({
    dir: d,
    libcuda: join(d, 'libcuda.so.1'),
    libnvidiaEncode: join(d, 'libnvidia-encode.so.1'),
  });
  const driver = inDir(dir);
  if (existsSync(driver.libcuda) && existsSync(driver.libnvidiaEncode)) return driver;
  // Built aside and renamed into place, so a concurrent test process never sees half a build.
  const staging = mkdtempSync(join(tmpdir(), 'arclight-fake-nvenc-build-'));
  const built = inDir(staging);
  const compile = async (source: string, output: string, soname: string): Promise<void> => {
    const args = [...flags, `-Wl,-soname,${soname}`, '-o', output, source, '-ldl'];
    try {
      await run(cxx, args);
    } catch (err) {
      throw new Error(`fake NVENC driver: compiling ${source} failed:\n${(err as Error).message}`);
    }
  };
  try {
    await Promise.all([
      compile(SOURCES.libcuda, built.libcuda, 'libcuda.so.1'),
      compile(SOURCES.libnvidiaEncode, built.libnvidiaEncode, 'libnvidia-encode.so.1'),
    ]);
    renameSync(staging, dir);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    // Another process finished the same build first: use it.
    if (existsSync(driver.libcuda) && existsSync(driver.libnvidiaEncode)) return driver;
    throw error;
  }
  return driver;
}

function run(file: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { encoding: 'utf8', timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}${stderr ? `\n${stderr}` : ''}`));
      else resolve(stdout);
    });
  });
}

export interface FakeNvencEnvOptions {
  /** ARCLIGHT_FAKE_NVENC_MODE (default: left unset, which the fake reads as 'ok'). */
  readonly mode?: 'ok' | 'no-encoder' | 'no-hevc';
  /** ARCLIGHT_FAKE_NVENC_LOG: where the fake appends its JSON lines. */
  readonly log?: string;
  /** ARCLIGHT_FAKE_CUDA_DEVICES. */
  readonly cudaDevices?: number;
  /** ARCLIGHT_FAKE_CUDA_INIT = 'fail'. */
  readonly cudaInitFails?: boolean;
  /** ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES: the device is lost after this many pictures (process-wide). */
  readonly failAfterFrames?: number;
}

/** The environment variables that point the encoder at the fake driver, with its options. */
export function fakeNvencEnv(driver: FakeNvencDriver, options: FakeNvencEnvOptions = {}): Record<string, string> {
  const env: Record<string, string> = {
    ARCLIGHT_LIBCUDA: driver.libcuda,
    ARCLIGHT_LIBNVIDIA_ENCODE: driver.libnvidiaEncode,
  };
  if (options.mode !== undefined) env.ARCLIGHT_FAKE_NVENC_MODE = options.mode;
  if (options.log !== undefined) env.ARCLIGHT_FAKE_NVENC_LOG = options.log;
  if (options.cudaDevices !== undefined) env.ARCLIGHT_FAKE_CUDA_DEVICES = String(options.cudaDevices);
  if (options.cudaInitFails) env.ARCLIGHT_FAKE_CUDA_INIT = 'fail';
  if (options.failAfterFrames !== undefined) env.ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES = String(options.failAfterFrames);
  return env;
}

/** One line of the fake's log (ARCLIGHT_FAKE_NVENC_LOG). */
export type FakeNvencLogEvent =
  | { readonly event: 'open'; readonly deviceType: 'cuda' }
  | {
      readonly event: 'initialize';
      readonly codec: 'h264' | 'hevc';
      readonly width: number;
      readonly height: number;
      readonly frameRateNum: number;
      readonly frameRateDen: number;
      /** 'p1' … 'p7'. */
      readonly preset: string;
      readonly tuning: 'low_latency' | 'ultra_low_latency' | 'high_quality' | 'lossless' | 'undefined' | 'other';
      readonly enablePTD: boolean;
      readonly maxEncodeWidth: number;
      readonly maxEncodeHeight: number;
      readonly rateControl: 'cbr' | 'vbr' | 'constqp' | 'cbr_lowdelay_hq' | 'cbr_hq' | 'vbr_hq' | 'other';
      readonly averageBitRate: number;
      readonly maxBitRate: number;
      readonly vbvBufferSize: number;
      readonly vbvInitialDelay: number;
      readonly multiPass: 'disabled' | 'two_pass_quarter' | 'two_pass_full' | 'other';
      readonly zeroReorderDelay: boolean;
      /** 4294967295 = NVENC_INFINITE_GOPLENGTH. */
      readonly gopLength: number;
      readonly frameIntervalP: number;
      readonly profile: string;
      readonly idrPeriod: number;
      /** NV_ENC_LEVEL value; 0 = autoselect. */
      readonly level: number;
      readonly enableIntraRefresh: boolean;
      readonly intraRefreshPeriod: number;
      readonly intraRefreshCnt: number;
      readonly repeatSPSPPS: boolean;
      readonly outputAUD: boolean;
      readonly disableSPSPPS: boolean;
    }
  | {
      readonly event: 'reconfigure';
      readonly width: number;
      readonly height: number;
      readonly frameRateNum: number;
      readonly frameRateDen: number;
      readonly rateControl: string;
      readonly averageBitRate: number;
      readonly maxBitRate: number;
      readonly vbvBufferSize: number;
      readonly vbvInitialDelay: number;
      readonly resetEncoder: boolean;
      readonly forceIDR: boolean;
    }
  | {
      readonly event: 'encode';
      /** 0-based count of pictures this session encoded before this one. */
      readonly frameIndex: number;
      /** NV_ENC_PIC_PARAMS::frameIdx as the encoder passed it. */
      readonly frameIdx: number;
      /** 'host': an nvEncCreateInputBuffer buffer; 'cuda': a mapped CUDA device pointer. */
      readonly input: 'host' | 'cuda';
      readonly bufferFormat: 'NV12' | 'IYUV' | 'YV12' | 'ARGB' | 'ABGR';
      /** NV_ENC_PIC_FLAG_FORCEIDR was set. */
      readonly forceIdr: boolean;
      /** NV_ENC_PIC_FLAG_OUTPUT_SPSPPS was set. */
      readonly outputSpsPps: boolean;
      /** The access unit carries SPS + PPS (H.264). */
      readonly wroteSpsPps: boolean;
      readonly pictureType: 'idr' | 'p' | 'i';
      readonly inputTimeStamp: number;
      readonly bytes: number;
    }
  | { readonly event: 'eos'; readonly pictures: number }
  | {
      readonly event: 'destroy';
      readonly pictures: number;
      readonly leakedInputBuffers: number;
      readonly leakedBitstreamBuffers: number;
      readonly leakedRegistrations: number;
      readonly leakedMappings: number;
    }
  /** A call the fake refused, with the NVENCSTATUS and the nvEncGetLastErrorString text. */
  | { readonly event: 'error'; readonly status: number; readonly message: string };

/** Reads the fake's JSON-lines log; an absent file reads as no events. */
export async function readFakeNvencLog(path: string): Promise<FakeNvencLogEvent[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as FakeNvencLogEvent);
}
