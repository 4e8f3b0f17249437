/**
 * The provisioning step `npm test` and `.ci/run` run first. Its choice (install, or name the exact
 * command) is a pure function, tested for each kind of machine; the script itself is run as a
 * child process with a package hidden (ARCLIGHT_PROVISION_HIDE), in modes that install nothing.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { findChromium } from '../test/support/chromium.ts';
import { findTurnserver } from '../test/support/coturn.ts';
import { findPostgresBinaries } from '../test/support/postgres.ts';
import { REQUIREMENTS, findMissing, planProvision, type Requirement } from './provision.mjs';

const SCRIPT = fileURLToPath(new URL('./provision.mjs', import.meta.url));
const isRoot = process.getuid?.() === 0;

function requirement(name: string): Requirement {
  const found = REQUIREMENTS.find((r) => r.name === name);
  if (!found) throw new Error(`no requirement ${name}`);
  return found;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function provision(args: string[], env: Record<string, string>): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [SCRIPT, ...args], { env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

describe('planProvision', () => {
  const chromium = requirement('chromium');
  const coturn = requirement('coturn');
  const missing = [chromium, coturn];

  it('does nothing when nothing is missing', () => {
    expect(planProvision({ missing: [], mode: 'auto', isRoot: true, hasAptGet: true, hasSudo: false })).toEqual({ action: 'none' });
  });

  it('installs with apt-get as root on Debian', () => {
    expect(planProvision({ missing, mode: 'auto', isRoot: true, hasAptGet: true, hasSudo: false })).toEqual({
      action: 'install',
      packages: ['chromium', 'coturn'],
      commands: [
        ['apt-get', 'update'],
        ['apt-get', 'install', '-y', '--no-install-recommends', 'chromium', 'coturn'],
      ],
    });
  });

  it('names the exact command, with sudo, when not root', () => {
    const plan = planProvision({ missing, mode: 'auto', isRoot: false, hasAptGet: true, hasSudo: true });
    expect(plan).toMatchObject({
      action: 'instruct',
      command: 'sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium coturn',
    });
    if (plan.action !== 'instruct') throw new Error('unreachable');
    expect(plan.message).toContain('not root, so not installing');
    // Each package with the tests that need it.
    expect(plan.message).toContain(`chromium: ${chromium.why}`);
    expect(plan.message).toContain(`coturn: ${coturn.why}`);
  });

  it('says to run it as root when there is no sudo', () => {
    const plan = planProvision({ missing, mode: 'auto', isRoot: false, hasAptGet: true, hasSudo: false });
    expect(plan).toMatchObject({
      action: 'instruct',
      command: 'apt-get update && apt-get install -y --no-install-recommends chromium coturn',
    });
    if (plan.action !== 'instruct') throw new Error('unreachable');
    expect(plan.message).toContain('Run as root:');
  });

  it('installs nothing in check mode, even as root', () => {
    const plan = planProvision({ missing, mode: 'check', isRoot: true, hasAptGet: true, hasSudo: false });
    expect(plan).toMatchObject({
      action: 'instruct',
      command: 'apt-get update && apt-get install -y --no-install-recommends chromium coturn',
    });
  });

  it('names the Debian packages when the machine has no apt-get', () => {
    const plan = planProvision({ missing, mode: 'auto', isRoot: true, hasAptGet: false, hasSudo: false });
    expect(plan).toMatchObject({ action: 'instruct', command: null, packages: ['chromium', 'coturn'] });
    if (plan.action !== 'instruct') throw new Error('unreachable');
    expect(plan.message).toContain('no apt-get');
  });
});

describe('the requirements', () => {
  it('look where the test helpers look', () => {
    const found = (find: () => unknown): boolean => {
      try {
        find();
        return true;
      } catch {
        return false;
      }
    };
    expect(requirement('chromium').find() !== undefined).toBe(found(findChromium));
    expect(requirement('coturn').find() !== undefined).toBe(found(findTurnserver));
    expect(requirement('postgresql').find() !== undefined).toBe(found(findPostgresBinaries));
  });

  it('counts a hidden one as missing', () => {
    expect(findMissing(REQUIREMENTS, new Set(['chromium'])).map((r) => r.name)).toContain('chromium');
  });
});

describe('scripts/provision.mjs', () => {
  it('with Chromium hidden, names the exact command and fails at once in check mode', async () => {
    const run = await provision(['--json'], { ARCLIGHT_PROVISION: 'check', ARCLIGHT_PROVISION_HIDE: 'chromium' });
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as { action: string; missing: string[]; command: string };
    expect(report.action).toBe('instruct');
    expect(report.missing).toContain('chromium');
    expect(report.command).toMatch(/apt-get install -y --no-install-recommends (\S+ )*chromium\b/);
    expect(run.stderr).toContain(report.command);
  });

  it('with Chromium hidden, would install it with apt-get as root (dry run), else names the command', async () => {
    const run = await provision(['--dry-run', '--json'], { ARCLIGHT_PROVISION: 'auto', ARCLIGHT_PROVISION_HIDE: 'chromium' });
    const report = JSON.parse(run.stdout) as { action: string; packages: string[]; commands?: string[] };
    expect(report.packages).toContain('chromium');
    if (isRoot) {
      expect(run.code).toBe(0);
      expect(report.action).toBe('install');
      expect(report.commands).toEqual(['apt-get update', `apt-get install -y --no-install-recommends ${report.packages.join(' ')}`]);
    } else {
      expect(run.code).toBe(1);
      expect(report.action).toBe('instruct');
    }
  });

  it('refuses an unknown name to hide and an unknown mode', async () => {
    expect((await provision([], { ARCLIGHT_PROVISION_HIDE: 'chromum' })).code).toBe(2);
    expect((await provision([], { ARCLIGHT_PROVISION: 'yes' })).code).toBe(2);
  });

  it('does nothing in skip mode', async () => {
    const run = await provision(['--json'], { ARCLIGHT_PROVISION: 'skip', ARCLIGHT_PROVISION_HIDE: 'chromium' });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ action: 'skip' });
  });
});
