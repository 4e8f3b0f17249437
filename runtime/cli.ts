/**
 * The `arclight` command.
 *
 *   arclight dev <module> [the same options]   (serve, reloading the module on every save)
 *   arclight serve <module> [--port 8080] [--host 127.0.0.1] [--ice-host ADDR]... [--ice-port-range A-B] [--public-ip ADDR]
 *                           [--turn-url URL]... [--turn-ttl S] [--latency realtime|smooth] [--no-playground] [--moderator-url URL]
 *                           [--upload-max-bytes N] [--upload-mime-type T]... [--upload-max-files N] [--upload-dir DIR]
 *                           [--no-recording | --recording-dir DIR --recording-track NAME --recording-segment-seconds S
 *                            --recording-bitrate KBPS --recording-encoder shared|own --max-clip-seconds S]
 */

import { parseArgs } from 'node:util';
import { startRuntime } from './server.ts';
import type { RuntimeOptions } from './runtime-options.ts';
import { iceOptionsFromFlags, TURN_SECRET_ENV } from './ice-cli-options.ts';
import { sessionFilesOptionsFromFlags } from './session-files-cli-options.ts';
import { videoBitrateFromFlags, videoCodecsFromFlag } from './video-codec-cli-options.ts';
import { HttpModerator } from './moderation/http-moderator.ts';
import { loadModelModule, ModelModuleError } from './model/load-model-module.ts';
import { startDevServer } from './dev/dev-server.ts';
import { ModelDefinitionError } from './model/validate-definition.ts';
import type { ModelDefinition } from './model/definition.ts';
import { writeStandardStream } from '../server-kit/log.ts';

const USAGE = `Usage: arclight serve <model-module> [options]
       arclight dev <model-module> [options]

Hosts a model module (a .ts or .js file, or a folder with index.ts, whose default export is
defineModel({...})) and serves it with the playground on http://localhost:8080.

arclight dev does the same while you work on the model: it watches the module's folder and, on
every save, loads the new version without restarting — the open session keeps running (its state
kept, its run loop restarted) unless the tracks or fps changed, and the playground refreshes its
forms by itself. Load errors are printed with file and line and shown in the playground; the
previous version keeps serving until the next save fixes them. Local mode only (no --coordinator).

Options:
  --port <n>              HTTP port (default 8080; 0 = any free port)
  --host <addr>           HTTP listen address (default 127.0.0.1; 0.0.0.0 for containers)
  --ice-host <addr>       gather and advertise ICE only on this address (repeatable)
  --ice-port-range <a-b>  UDP port range for media, e.g. 40000-40999 (one port per open client
                          connection; open it in the firewall)
  --public-ip <addr>      the address clients reach this host at behind a 1:1 NAT (cloud public IP,
                          node external IP): each media port is also offered there
  --turn-url <url>        a TURN server clients may relay through, e.g.
                          turn:turn.example.com:3478?transport=udp (repeatable); each ice_servers
                          request gets fresh time-limited credentials (coturn use-auth-secret), the
                          shared secret from $${TURN_SECRET_ENV}
  --turn-ttl <seconds>    how long those credentials stay valid (default 3600)
  --codecs <list>         video codecs to answer with, in order of preference, from h265, h264, vp8
                          (default: h265 first only when a hardware HEVC encoder exists, then h264,
                          vp8); e.g. h265,h264,vp8 serves software x265 to clients that offer H.265
  --video-min-kbps <n>    network adaptation's floor for each video stream's encoder (default 500;
                          below it frames are held back instead: the send budget)
  --video-max-kbps <n>    its ceiling (default 10000; a track's own bitrateKbps caps it too)
  --latency <mode>        realtime: browsers show each frame as soon as it is decoded (lowest
                          latency); smooth: bounded buffering for lossy networks (default: the
                          model's choice, else smooth)
  --no-playground         do not serve the playground page at /
  --no-recording          do not record sessions (requestClip/requestRecording then fail)
  --recording-dir <dir>   keep recordings here (default a fresh folder in the OS temp dir); each
                          is deleted five minutes after its session ends
  --recording-track <name>  the output video track to record (default the model's first); the first
                          output audio track is recorded beside it
  --recording-segment-seconds <s>  recording segment length (default 2); a clip holds up to one
                          segment more than asked
  --recording-encoder <shared|own>  shared (default): record the live H.264 stream when a viewer
                          watches one, else encode; own: always a second H.264 High encode, an
                          archive independent of viewers
  --recording-bitrate <kbps>  the recorder's own encoder's bitrate (default the track's live bitrate)
  --max-clip-seconds <s>  the longest clip requestClip returns (default 300; at least the segment
                          length)
  --upload-max-bytes <n>  largest upload, bytes or with K/M/G (default 100M)
  --upload-mime-type <t>  accept uploads of this type, exact (image/png) or a family (image/*)
                          (repeatable; default any type)
  --upload-max-files <n>  uploads per session (default 100)
  --upload-dir <dir>      keep uploads here (default a fresh folder in the OS temp dir); a session's
                          files are deleted when it ends
  --grace <seconds>       end a session this long after its last client leaves (default 60)
  --coordinator <url>     hosted mode: register with this coordinator, which opens sessions here
                          (the runtime secret comes from $ARCLIGHT_RUNTIME_SECRET)
  --runtime-id <id>       hosted mode: this runtime's id (default a fresh one per start)
  --advertise-url <url>   hosted mode: where the coordinator reaches this runtime (default its own URL)
  --drain-seconds <s>     hosted mode: on SIGTERM, take no new sessions and let the open one run this
                          long before closing (default 300; a second signal closes at once)
  --moderator-url <url>   check the model's moderated text parameters with this HTTP service before
                          each command runs (POST {session_id, command, fields} → {allowed, reason?});
                          a bearer token comes from $ARCLIGHT_MODERATOR_TOKEN. Default: no moderation
  -h, --help              show this help

The hosted service's coordinator has its own commands: arclight coordinator, arclight admin
(see arclight admin --help); arclight stack runs a coordinator, a hosted runtime and this
playground together (see arclight stack --help).`;

export async function main(argv: readonly string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        'ice-host': { type: 'string', multiple: true },
        'ice-port-range': { type: 'string' },
        'public-ip': { type: 'string' },
        'turn-url': { type: 'string', multiple: true },
        'turn-ttl': { type: 'string' },
        latency: { type: 'string' },
        codecs: { type: 'string' },
        'video-min-kbps': { type: 'string' },
        'video-max-kbps': { type: 'string' },
        'no-playground': { type: 'boolean' },
        'no-recording': { type: 'boolean' },
        'recording-dir': { type: 'string' },
        'recording-track': { type: 'string' },
        'recording-segment-seconds': { type: 'string' },
        'recording-bitrate': { type: 'string' },
        'recording-encoder': { type: 'string' },
        'max-clip-seconds': { type: 'string' },
        'upload-max-bytes': { type: 'string' },
        'upload-mime-type': { type: 'string', multiple: true },
        'upload-max-files': { type: 'string' },
        'upload-dir': { type: 'string' },
        grace: { type: 'string' },
        coordinator: { type: 'string' },
        'runtime-id': { type: 'string' },
        'advertise-url': { type: 'string' },
        'drain-seconds': { type: 'string' },
        'moderator-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    process.stderr.write(`arclight: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const [verb, modulePath, ...extra] = positionals;
  const dev = verb === 'dev';
  if ((verb !== 'serve' && !dev) || !modulePath || extra.length > 0) {
    process.stderr.write(
      `arclight: ${verb && verb !== 'serve' && !dev ? `unknown command "${verb}"` : 'missing model module'}\n\n${USAGE}\n`,
    );
    return 2;
  }
  if (dev && values.coordinator !== undefined) {
    process.stderr.write(`arclight: arclight dev runs in local mode; --coordinator is for arclight serve\n`);
    return 2;
  }
  const port = values.port === undefined ? 8080 : /^\d{1,5}$/.test(values.port) ? Number(values.port) : NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`arclight: --port must be an integer from 0 to 65535; got "${values.port}"\n`);
    return 2;
  }
  if (values.latency !== undefined && values.latency !== 'realtime' && values.latency !== 'smooth') {
    process.stderr.write(`arclight: --latency must be "realtime" or "smooth"; got "${values.latency}"\n`);
    return 2;
  }
  const videoCodecs = videoCodecsFromFlag(values.codecs);
  if (videoCodecs !== undefined && 'error' in videoCodecs) {
    process.stderr.write(`arclight: ${videoCodecs.error}\n`);
    return 2;
  }
  const videoBitrate = videoBitrateFromFlags(values['video-min-kbps'], values['video-max-kbps']);
  if (videoBitrate !== undefined && 'error' in videoBitrate) {
    process.stderr.write(`arclight: ${videoBitrate.error}\n`);
    return 2;
  }
  const ice = iceOptionsFromFlags(values, process.env);
  if ('error' in ice) {
    process.stderr.write(`arclight: ${ice.error}\n`);
    return 2;
  }
  const files = sessionFilesOptionsFromFlags(values);
  if ('error' in files) {
    process.stderr.write(`arclight: ${files.error}\n`);
    return 2;
  }
  const grace = values.grace === undefined ? undefined : /^\d+(\.\d+)?$/.test(values.grace) ? Number(values.grace) : NaN;
  if (grace !== undefined && !(grace > 0)) {
    process.stderr.write(`arclight: --grace must be a positive number of seconds\n`);
    return 2;
  }
  const secret = process.env['ARCLIGHT_RUNTIME_SECRET'];
  if (values.coordinator !== undefined && !/^https?:\/\/\S+$/.test(values.coordinator)) {
    process.stderr.write(`arclight: --coordinator must be an http(s) URL\n`);
    return 2;
  }
  if (values.coordinator !== undefined && !secret) {
    process.stderr.write(`arclight: --coordinator needs the runtime secret in $ARCLIGHT_RUNTIME_SECRET\n`);
    return 2;
  }
  const drainSeconds =
    values['drain-seconds'] === undefined ? 300 : /^\d+$/.test(values['drain-seconds']) ? Number(values['drain-seconds']) : NaN;
  if (Number.isNaN(drainSeconds)) {
    process.stderr.write(`arclight: --drain-seconds must be a whole number of seconds\n`);
    return 2;
  }

  let moderator: HttpModerator | undefined;
  if (values['moderator-url'] !== undefined) {
    const token = process.env['ARCLIGHT_MODERATOR_TOKEN'];
    try {
      moderator = new HttpModerator({ url: values['moderator-url'], ...(token ? { token } : {}) });
    } catch {
      process.stderr.write(`arclight: --moderator-url must be an http(s) URL\n`);
      return 2;
    }
  }

  const runtimeOptions = {
    port,
    ...(values.host ? { host: values.host } : {}),
    ice: ice.ice,
    ...(values.latency ? { latencyMode: values.latency as 'realtime' | 'smooth' } : {}),
    ...(videoCodecs ? { videoCodecs } : {}),
    ...(videoBitrate ? { video: videoBitrate } : {}),
    playground: !values['no-playground'],
    // Recording (for clips) is on for served models unless --no-recording: it is what the spec
    // promises clients.
    ...(files.recording ? { recording: files.recording } : {}),
    ...(files.uploads ? { uploads: files.uploads } : {}),
    ...(grace === undefined ? {} : { reconnectGraceSeconds: grace }),
    ...(moderator ? { moderation: { moderator } } : {}),
    ...(values.coordinator
      ? {
          hosted: {
            coordinatorUrl: values.coordinator,
            secret: secret!,
            ...(values['runtime-id'] ? { runtimeId: values['runtime-id'] } : {}),
            ...(values['advertise-url'] ? { advertiseUrl: values['advertise-url'] } : {}),
          },
        }
      : {}),
  } satisfies Omit<RuntimeOptions, 'model'>;
  if (dev) return runDev(modulePath, runtimeOptions);

  const model = await loadModelForCli(modulePath);
  if (model === undefined) return 1;
  let runtime;
  try {
    runtime = await startRuntime({ ...runtimeOptions, model: model as never });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      process.stderr.write(`arclight: port ${port} is in use; pick another with --port\n`);
      return 1;
    }
    throw error;
  }
  writeStandardStream(process.stdout, `arclight: serving model "${model.name}" on ${runtime.url.replace('127.0.0.1', 'localhost')}\n`);
  const signalled = () =>
    new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
  await signalled();
  if (values.coordinator && drainSeconds > 0) {
    writeStandardStream(process.stdout, `arclight: draining (no new sessions; up to ${drainSeconds} s for the open one)\n`);
    await Promise.race([runtime.drain(drainSeconds * 1000), signalled()]);
  }
  writeStandardStream(process.stdout, 'arclight: shutting down\n');
  await runtime.close();
  return 0;
}

/** `arclight dev`: serves and reloads on every save until SIGINT/SIGTERM. */
async function runDev(modulePath: string, runtimeOptions: Omit<RuntimeOptions, 'model'>): Promise<number> {
  let server;
  try {
    server = await startDevServer({
      modulePath,
      runtime: runtimeOptions,
      print: (line) => writeStandardStream(process.stdout, `${line}\n`),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(`arclight: port ${runtimeOptions.port ?? 8080} is in use; pick another with --port\n`);
      return 1;
    }
    throw error;
  }
  process.stdout.write(`arclight: developing ${modulePath} on ${server.runtime.url.replace('127.0.0.1', 'localhost')}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  writeStandardStream(process.stdout, 'arclight: shutting down\n');
  await server.close();
  return 0;
}

/**
 * Loads a model module for a command line: a module that cannot be loaded, or whose definition
 * is wrong, is reported on stderr (with the cause's stack: usually the author's own error) and
 * gives undefined, for exit code 1. Shared with `arclight stack` (dev/stack-cli.ts).
 */
export async function loadModelForCli(modulePath: string): Promise<ModelDefinition<unknown> | undefined> {
  try {
    return await loadModelModule(modulePath);
  } catch (error) {
    if (error instanceof ModelModuleError || error instanceof ModelDefinitionError) {
      process.stderr.write(`arclight: ${error.message}\n`);
      if (error.cause instanceof Error && error.cause.stack) process.stderr.write(`${error.cause.stack}\n`);
      return undefined;
    }
    throw error;
  }
}
