/**
 * Validates and dispatches commands to the model's handlers, and turns every result into exactly
 * one outcome for the calling client: a typed reply, a bodyless ack, or a failure with a code.
 */

import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { CommandCapability } from '../../protocol/capabilities.ts';
import type { JsonSchema, JsonValue } from '../../protocol/json-schema.ts';
import type { Logger } from '../../server-kit/log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { moderatedFieldPointers, moderatedValues } from '../moderation/moderated-fields.ts';
import { ModerationGate } from '../moderation/moderation-gate.ts';
import { resolveModerationOptions, type ModerationOptions } from '../moderation/moderator.ts';
import { callAuthorCode } from './author-code.ts';
import { isCommandError } from './command-error.ts';
import type { CommandContext, CommandSpec } from './definition.ts';
import type { ModelSession } from './model-session.ts';

export type CommandOutcome =
  | { readonly kind: 'reply'; readonly type: string; readonly data: JsonValue }
  | { readonly kind: 'ack' }
  | { readonly kind: 'failed'; readonly code: string; readonly message: string; readonly field?: string };

interface CompiledCommand {
  readonly name: string;
  readonly spec: CommandSpec<unknown, unknown>;
  readonly validateParams: ValidateFunction;
  readonly validateReply: ValidateFunction | undefined;
  readonly replyType: string;
  /** JSON pointers of its `x-arclight-moderated` parameters; only these reach a moderator. */
  readonly moderatedFields: readonly string[];
}

const ANY_OBJECT: JsonSchema = { type: 'object' };

export class CommandRouter {
  readonly #commands = new Map<string, CompiledCommand>();
  readonly #log: Logger;
  readonly #metrics: RuntimeMetrics | undefined;
  readonly #moderation: Required<ModerationOptions> | undefined;
  /** One moderation queue per session, made at its first moderated command and gone with it. */
  readonly #gates = new WeakMap<ModelSession<unknown>, ModerationGate>();

  /** @throws TypeError when a schema does not compile — a model bug reported at load time. */
  constructor(
    commands: Readonly<Record<string, CommandSpec<never, never>>>,
    log: Logger,
    metrics?: RuntimeMetrics,
    moderation?: ModerationOptions,
  ) {
    this.#log = log;
    this.#metrics = metrics;
    this.#moderation = moderation === undefined ? undefined : resolveModerationOptions(moderation);
    // useDefaults fills schema defaults into params so handlers see them.
    const ajv = new Ajv2020({ allErrors: false, strict: false, useDefaults: true });
    addFormats.default(ajv);
    for (const [name, rawSpec] of Object.entries(commands)) {
      const spec = rawSpec as unknown as CommandSpec<unknown, unknown>;
      if (typeof spec?.handler !== 'function') throw new TypeError(`command "${name}" has no handler function`);
      try {
        this.#commands.set(name, {
          name,
          spec,
          validateParams: ajv.compile((spec.params ?? ANY_OBJECT) as object),
          validateReply: spec.reply?.schema === undefined ? undefined : ajv.compile(spec.reply.schema as object),
          replyType: spec.reply?.type ?? `${name}_result`,
          moderatedFields: moderatedFieldPointers(spec.params),
        });
      } catch (error) {
        throw new TypeError(`command "${name}" has an invalid JSON Schema: ${(error as Error).message}`);
      }
    }
  }

  get names(): string[] {
    return [...this.#commands.keys()];
  }

  capabilities(): CommandCapability[] {
    return [...this.#commands.values()].map((c) => ({
      name: c.name,
      description: c.spec.description ?? '',
      schema: (c.spec.params ?? ANY_OBJECT) as JsonSchema,
      // Only declared replies are advertised: a command without one acknowledges (or, if its
      // handler returns a value anyway, replies with type `<name>_result`).
      ...(c.spec.reply === undefined
        ? {}
        : {
            reply:
              c.spec.reply.schema === undefined ? { type: c.replyType } : { type: c.replyType, schema: c.spec.reply.schema as JsonSchema },
          }),
    }));
  }

  /**
   * Never throws: every failure, the model's included, becomes a `failed` outcome. `files`: file
   * parameters, validated as references within `data` and handed to the handler as these. `log`:
   * where a handler's failure is told in detail — the session's logger, so the session's log has
   * it (the client only learns the code); default the runtime's. `between`: runs the handler —
   * after validation and moderation — where it may run; a step model's session passes its
   * StepGate's `between`, so handlers run between steps (model/step-driver.ts).
   */
  async dispatch(
    name: string,
    data: unknown,
    context: CommandContext<unknown>,
    files?: Readonly<Record<string, unknown>>,
    log: Logger = this.#log,
    between?: <T>(handler: () => Promise<T>) => Promise<T>,
  ): Promise<CommandOutcome> {
    const started = performance.now();
    const outcome = await this.#run(name, data, context, files, log, between);
    const known = this.#commands.has(name);
    // Unknown names are not used as label values: a client must not be able to grow the metric set.
    const label = known ? name : '(unknown)';
    this.#metrics?.commands.inc({ command: label, outcome: outcome.kind === 'failed' ? outcome.code : outcome.kind });
    this.#metrics?.commandDuration.observe({ command: label }, (performance.now() - started) / 1000);
    return outcome;
  }

  async #run(
    name: string,
    data: unknown,
    context: CommandContext<unknown>,
    files: Readonly<Record<string, unknown>> | undefined,
    log: Logger,
    between: (<T>(handler: () => Promise<T>) => Promise<T>) | undefined,
  ): Promise<CommandOutcome> {
    const command = this.#commands.get(name);
    if (!command) {
      return {
        kind: 'failed',
        code: 'unknown_command',
        message: `The model has no command "${name}". Known: ${this.names.join(', ') || '(none)'}.`,
      };
    }
    const params = data === undefined ? {} : data;
    if (!command.validateParams(params)) {
      return { kind: 'failed', code: 'invalid_params', ...describeSchemaError(command.validateParams.errors) };
    }
    const refused = await this.#moderate(command, params, context);
    if (refused) return refused;
    if (files) Object.assign(params as Record<string, unknown>, files);
    // A CommandError is the model answering on purpose, not a fault: it is not logged as one.
    const call = () => callAuthorCode(log, `command ${name}`, () => command.spec.handler(params, context), undefined, isCommandError);
    const result = between ? await between(call) : await call();
    if (!result.ok) {
      if (isCommandError(result.error)) return { kind: 'failed', code: result.error.code, message: result.error.message };
      // The detail stays in the log (callAuthorCode logged it); the client learns only that it failed.
      return { kind: 'failed', code: 'internal_error', message: `Command "${name}" failed inside the model.` };
    }
    if (result.value === undefined) return { kind: 'ack' };
    if (command.validateReply && !command.validateReply(result.value)) {
      log.error('model reply breaks its declared schema', { command: name, errors: command.validateReply.errors });
      return { kind: 'failed', code: 'internal_error', message: `Command "${name}" produced an invalid reply.` };
    }
    return { kind: 'reply', type: command.replyType, data: result.value as JsonValue };
  }

  /**
   * The moderation step (runtime/moderation/moderation-gate.ts): waits for the moderator when
   * the runtime has one and the call carries moderated text; a failed outcome when it refuses.
   */
  async #moderate(command: CompiledCommand, params: unknown, context: CommandContext<unknown>): Promise<CommandOutcome | undefined> {
    if (!this.#moderation || command.moderatedFields.length === 0) return undefined;
    const fields = moderatedValues(params, command.moderatedFields);
    if (Object.keys(fields).length === 0) return undefined;
    const decision = await this.#gateFor(context.session).check(command.name, fields);
    if (decision.admitted) return undefined;
    if (decision.outcome === 'ended') {
      return { kind: 'failed', code: 'session_ended', message: `The session ended before "${command.name}" was moderated.` };
    }
    const because = [decision.category && `category: ${decision.category}`, decision.reason].filter(Boolean).join('; ');
    return {
      kind: 'failed',
      code: 'moderation_rejected',
      message: `Moderation rejected "${command.name}"${because ? ` (${because})` : ''}.`,
      ...(decision.field ? { field: decision.field } : {}),
    };
  }

  #gateFor(session: ModelSession<unknown>): ModerationGate {
    let gate = this.#gates.get(session);
    if (!gate) {
      gate = new ModerationGate({
        sessionId: session.id,
        moderator: this.#moderation!.moderator,
        admitAfterMs: this.#moderation!.admitAfterMs,
        signal: session.signal,
        log: this.#log.child({ session: session.id }),
        ...(this.#metrics ? { metrics: this.#metrics } : {}),
      });
      this.#gates.set(session, gate);
    }
    return gate;
  }
}

/** One readable sentence and the JSON pointer of the field at fault. */
export function describeSchemaError(
  errors: ErrorObject[] | null | undefined,
  /** What the validated value is called in messages when the root itself is at fault. */
  rootName = 'params',
): { message: string; field: string } {
  const error = errors?.[0];
  if (!error) return { message: `Invalid ${rootName}.`, field: '' };
  let field = error.instancePath;
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') field += `/${params['missingProperty']}`;
  if (error.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    field += `/${params['additionalProperty']}`;
  }
  const where = field === '' ? rootName : `"${field.slice(1).replaceAll('/', '.')}"`;
  const message =
    error.keyword === 'required'
      ? `${where} is required`
      : error.keyword === 'additionalProperties'
        ? `${where} is not a known parameter`
        : `${where} ${error.message ?? 'is invalid'}`;
  return { message, field };
}
