// Types for provision.mjs (plain JavaScript, since CI runs it before `npm ci` installs TypeScript).

export interface Requirement {
  /** The name ARCLIGHT_PROVISION_HIDE takes. */
  readonly name: string;
  /** The Debian package that provides it. */
  readonly debian: string;
  /** Which tests need it. */
  readonly why: string;
  /** Where it is on this machine, or undefined. */
  find(): string | undefined;
  /** Part of the native addon's build: the addon is rebuilt after it is installed. */
  readonly native?: boolean;
}

export type ProvisionPlan =
  | { readonly action: 'none' }
  | { readonly action: 'install'; readonly packages: string[]; readonly commands: string[][] }
  | { readonly action: 'instruct'; readonly packages: string[]; readonly command: string | null; readonly message: string };

export const REQUIREMENTS: readonly Requirement[];
export function findMissing(requirements?: readonly Requirement[], hidden?: ReadonlySet<string>): Requirement[];
export function planProvision(machine: {
  missing: readonly Requirement[];
  mode: 'auto' | 'check';
  isRoot: boolean;
  hasAptGet: boolean;
  hasSudo: boolean;
}): ProvisionPlan;
export function main(argv?: string[], env?: NodeJS.ProcessEnv): number;
