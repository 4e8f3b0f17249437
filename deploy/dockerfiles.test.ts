/**
 * The Dockerfiles, read as text (no Docker engine here): their stages, non-root users, health
 * checks (run for real against a stand-in server), ports, and that what Kubernetes and the
 * entrypoints expect of the images is there.
 */

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}
interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** Instructions (continuation lines joined, comments dropped), grouped into stages by FROM. */
function parseDockerfile(path: string): { args: Map<string, string>; stages: Stage[] } {
  const text = readFileSync(join(root, path), 'utf8');
  const logical: string[] = [];
  let pending = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue; // comments (and the syntax directive)
    if (line.trim() === '' && pending === '') continue;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    logical.push((pending + line).trim());
    pending = '';
  }
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of logical.filter((l) => l !== '')) {
    const [, keyword, rest] = /^(\w+)\s+(.*)$/s.exec(line) ?? [];
    if (!keyword || rest === undefined) throw new Error(`${path}: cannot read "${line}"`);
    const upper = keyword.toUpperCase();
    if (upper === 'FROM') {
      const [, image, name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest) ?? [];
      if (!image) throw new Error(`${path}: bad FROM "${rest}"`);
      const from = image.replace(/\$\{(\w+)\}/g, (_, arg: string) => args.get(arg) ?? `\${${arg}}`);
      stages.push({ from, name, instructions: [] });
    } else if (stages.length === 0) {
      if (upper !== 'ARG') throw new Error(`${path}: only ARG may come before FROM`);
      const [, argName, value] = /^(\w+)=(.*)$/.exec(rest) ?? [];
      if (argName) args.set(argName, value ?? '');
    } else {
      stages.at(-1)!.instructions.push({ keyword: upper, args: rest });
    }
  }
  return { args, stages };
}

const all = (stage: Stage, keyword: string): string[] => stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
const one = (stage: Stage, keyword: string): string => {
  const found = all(stage, keyword);
  expect(found, `exactly one ${keyword}`).toHaveLength(1);
  return found[0]!;
};
/** ENV values of a stage (KEY=value pairs, possibly several per instruction). */
function envOf(stage: Stage): Map<string, string> {
  const env = new Map<string, string>();
  for (const args of all(stage, 'ENV')) for (const [, key, value] of args.matchAll(/(\w+)=(\S+)/g)) env.set(key!, value!);
  return env;
}
function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((item): item is string => typeof item === 'string'))
    throw new Error(`not an exec-form array: ${args}`);
  return parsed;
}

function expectNonRootUser(stage: Stage): void {
  const user = one(stage, 'USER');
  // Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
  expect(user).toMatch(/^\d+:\d+$/);
  expect(user.split(':')[0]).not.toBe('0');
}

/** Runs a HEALTHCHECK's exec-form command (with this node) against a server answering `status`. */
async function runHealthcheck(
  command: readonly string[],
  path: string,
  status: number | 'none',
  portVariable: string,
): Promise<{ exit: number | null; requested: string[] }> {
  const requested: string[] = [];
  const server = createServer((request, response) => {
    requested.push(request.url ?? '');
    response.writeHead(request.url === path ? (status === 'none' ? 500 : status) : 404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  if (status === 'none') {
    server.close();
    await once(server, 'close');
  }
  try {
    const [program, ...args] = command;
    expect(program).toBe('node');
    const child = spawn(process.execPath, args, { env: { [portVariable]: String(port) }, stdio: 'ignore' });
    const [exit] = (await once(child, 'exit')) as [number | null];
    return { exit, requested };
  } finally {
    if (status !== 'none') server.close();
  }
}

describe('deploy/runtime/Dockerfile', () => {
  const { args, stages } = parseDockerfile('deploy/runtime/Dockerfile');
  const final = stages.at(-1)!;
  const build = stages.find((stage) => stage.name === 'build')!;

  it('is multi-stage: Node 20, a build stage, and a CUDA + cuDNN runtime image last', () => {
    expect(args.get('NODE_VERSION')).toBe('20');
    expect(stages.map((stage) => stage.from)).toEqual([
      'node:20-bookworm-slim',
      `nvidia/cuda:${args.get('CUDA_VERSION')}-base-ubuntu22.04`,
      `nvidia/cuda:${args.get('CUDA_VERSION')}-cudnn-runtime-ubuntu22.04`,
    ]);
    expect(args.get('CUDA_VERSION')).toMatch(/^12\.\d+\.\d+$/);
    for (const stage of [build, final]) expect(all(stage, 'COPY')).toContain('--from=node /usr/local/bin/node /usr/local/bin/node');
  });

  it('builds the native addon with NVENC compiled in and onnxruntime-node with its CUDA 12 provider', () => {
    const runs = all(build, 'RUN').join('\n');
    expect(runs).toMatch(/apt-get install -y --no-install-recommends [^\n]*\blibffmpeg-nvenc-dev\b/);
    for (const tool of ['cmake', 'g\\+\\+', 'make']) expect(runs).toMatch(new RegExp(`apt-get install[^\\n]* ${tool}(?=\\s)`));
    expect(runs).toContain('npm ci');
    // allowScripts denies the package's own install script: the image runs it itself.
    expect(runs).toContain('ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js');
    expect(runs).toContain('node scripts/build-native.mjs --strict');
    expect(runs).toContain('features().nvenc ? 0 : 1');
    expect(runs).toContain('libonnxruntime_providers_cuda.so');
    expect(runs).toContain('npm prune --omit=dev');
    expect(all(final, 'COPY')).toContain('--from=build /app /app');
  });

  it("lets a model anywhere under / import 'arclight/runtime' from the image's own copy", () => {
    expect(all(final, 'RUN').join('\n')).toContain('ln -s /app /node_modules/arclight');
  });

  it('runs as a non-root user, under tini, through the entrypoint', () => {
    expectNonRootUser(final);
    expect(execForm(one(final, 'ENTRYPOINT'))).toEqual(['/usr/bin/tini', '--', '/usr/local/bin/arclight-runtime-entrypoint']);
    expect(all(final, 'RUN').join('\n')).toMatch(/apt-get install[^\n]* tini\b/);
    const copies = all(final, 'COPY');
    expect(copies).toContain('--chmod=0755 deploy/runtime/entrypoint.sh /usr/local/bin/arclight-runtime-entrypoint');
    // The Kubernetes preStop hook runs this path (deploy/k8s/base/runtime-pattern.yaml).
    expect(copies).toContain('--chmod=0755 deploy/runtime/drain.sh /usr/local/bin/arclight-drain');
    expect(readFileSync(join(root, 'deploy/k8s/base/runtime-pattern.yaml'), 'utf8')).toContain(
      'command: ["/usr/local/bin/arclight-drain"]',
    );
  });

  it('lets the NVIDIA container toolkit mount NVENC (the video capability), and knows where Arclight is', () => {
    const env = envOf(final);
    expect(env.get('NVIDIA_DRIVER_CAPABILITIES')?.split(',')).toEqual(expect.arrayContaining(['compute', 'utility', 'video']));
    expect(env.get('ARCLIGHT_HOME')).toBe('/app');
  });

  it('exposes the HTTP port and the UDP range ICE binds', () => {
    const exposed = all(final, 'EXPOSE');
    expect(exposed).toContain('8080/tcp');
    const range = envOf(final).get('ARCLIGHT_ICE_PORT_RANGE');
    expect(range).toMatch(/^\d+-\d+$/);
    expect(exposed).toContain(`${range}/udp`);
  });

  it('has a HEALTHCHECK on GET /health that passes on 200 and fails on 503 or no answer', async () => {
    const healthcheck = one(final, 'HEALTHCHECK');
    expect(healthcheck).toMatch(/--start-period=\d+s/);
    const command = execForm(healthcheck.replace(/^.*?CMD\s+/, ''));
    const healthy = await runHealthcheck(command, '/health', 200, 'ARCLIGHT_PORT');
    expect(healthy).toEqual({ exit: 0, requested: ['/health'] });
    expect((await runHealthcheck(command, '/health', 503, 'ARCLIGHT_PORT')).exit).toBe(1);
    expect((await runHealthcheck(command, '/health', 'none', 'ARCLIGHT_PORT')).exit).toBe(1);
  });
});

describe('deploy/coordinator/Dockerfile', () => {
  const { args, stages } = parseDockerfile('deploy/coordinator/Dockerfile');
  const final = stages.at(-1)!;

  it('is multi-stage on slim Node 20 images', () => {
    expect(args.get('NODE_VERSION')).toBe('20');
    expect(stages.map((stage) => [stage.name, stage.from])).toEqual([
      ['build', 'node:20-bookworm-slim'],
      [undefined, 'node:20-bookworm-slim'],
    ]);
    expect(all(stages[0]!, 'RUN').join('\n')).toContain('ARCLIGHT_SKIP_NATIVE=1 npm ci');
    expect(all(final, 'COPY')).toContain('--from=build /app /app');
  });

  it('runs as a non-root user, under tini, through the entrypoint', () => {
    expectNonRootUser(final);
    expect(execForm(one(final, 'ENTRYPOINT'))).toEqual(['/usr/bin/tini', '--', '/usr/local/bin/arclight-coordinator-entrypoint']);
    expect(all(final, 'COPY')).toContain('--chmod=0755 deploy/coordinator/entrypoint.sh /usr/local/bin/arclight-coordinator-entrypoint');
    expect(all(final, 'EXPOSE')).toEqual(['8090/tcp']);
  });

  it('removes only packages the coordinator never imports', () => {
    const runs = all(stages[0]!, 'RUN').join('\n');
    expect(runs).toContain('npm prune --omit=dev --omit=optional');
    expect(runs).toContain('rm -rf node_modules/onnxruntime-node');
    // The packages the coordinator's CLI reaches, following its relative imports.
    const packages = new Set<string>();
    const seen = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const source = readFileSync(file, 'utf8');
      for (const [, specifier] of source.matchAll(/(?:from\s+|import\s*\(\s*)'([^']+)'/g)) {
        if (specifier!.startsWith('.')) visit(join(dirname(file), specifier!));
        else if (!specifier!.startsWith('node:'))
          packages.add(specifier!.startsWith('@') ? specifier!.split('/').slice(0, 2).join('/') : specifier!.split('/')[0]!);
      }
    };
    visit(join(root, 'coordinator/cli.ts'));
    expect(seen.size).toBeGreaterThan(10);
    expect(packages.has('better-sqlite3') && packages.has('pg')).toBe(true);
    for (const name of ['onnxruntime-node', 'node-av', '@roamhq/wrtc', 'esbuild', 'werift']) expect(packages.has(name), name).toBe(false);
    // …and each is installed by `npm ci` and kept by the prune (neither dev-only nor optional-only).
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const kept = (name: string): boolean => {
      const entry = lock.packages[`node_modules/${name}`];
      return entry !== undefined && !entry.dev && !entry.optional;
    };
    expect([...packages].filter((name) => !kept(name))).toEqual([]);
  });

  it('has a HEALTHCHECK on GET /health that passes on 200 and fails on 503 (database unreachable) or no answer', async () => {
    const healthcheck = one(final, 'HEALTHCHECK');
    expect(healthcheck).toMatch(/--start-period=\d+s/);
    const command = execForm(healthcheck.replace(/^.*?CMD\s+/, ''));
    expect(await runHealthcheck(command, '/health', 200, 'ARCLIGHT_PORT')).toEqual({ exit: 0, requested: ['/health'] });
    expect((await runHealthcheck(command, '/health', 503, 'ARCLIGHT_PORT')).exit).toBe(1);
    expect((await runHealthcheck(command, '/health', 'none', 'ARCLIGHT_PORT')).exit).toBe(1);
  });
});

describe('.dockerignore', () => {
  const ignored = readFileSync(join(root, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));

  it('leaves out what the images build for themselves', () => {
    expect(ignored).toEqual(expect.arrayContaining(['.git', 'node_modules', 'dist', 'build']));
  });

  it('keeps everything the builds read', () => {
    for (const needed of [
      'package.json',
      'package-lock.json',
      'CMakeLists.txt',
      'native',
      'scripts',
      'bin',
      'runtime',
      'coordinator',
      'server-kit',
      'client',
      'protocol',
      'dev',
      'models',
      'deploy/runtime',
      'deploy/coordinator',
    ]) {
      expect(
        ignored.filter((pattern) => needed === pattern || needed.startsWith(`${pattern}/`)),
        needed,
      ).toEqual([]);
    }
  });
});

describe('the Dockerfile `arclight init` writes (dev/scaffold/template/Dockerfile)', () => {
  const { args, stages } = parseDockerfile('dev/scaffold/template/Dockerfile');
  const final = stages.at(-1)!;

  it('builds on the runtime image, with the model’s own dependencies from a Node stage (the runtime image has no npm)', () => {
    expect(args.get('NODE_VERSION')).toBe('20');
    expect(stages.map((stage) => stage.from)).toEqual(['node:20-bookworm-slim', 'arclight-runtime:0.1.0']);
    expect(all(stages[0]!, 'RUN').join('\n')).toContain('npm install --omit=dev --omit=peer');
    expect(all(final, 'RUN')).toEqual([]);
  });

  it('puts the model under /models, where the runtime image resolves arclight/runtime, and points the entrypoint at it', () => {
    expect(all(final, 'COPY')).toEqual([
      '--from=dependencies /model/node_modules /models/arclight-template-model/node_modules',
      '. /models/arclight-template-model/',
    ]);
    expect(envOf(final).get('ARCLIGHT_MODEL')).toBe('/models/arclight-template-model/index.ts');
    // The runtime image's ENTRYPOINT, USER and HEALTHCHECK are inherited, not replaced.
    for (const keyword of ['ENTRYPOINT', 'CMD', 'USER', 'HEALTHCHECK']) expect(all(final, keyword)).toEqual([]);
    expect(readFileSync(join(root, 'dev/scaffold/template/dockerignore'), 'utf8')).toMatch(/^node_modules$/m);
  });
});
