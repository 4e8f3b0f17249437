/**
 * Checks a model module's default export before the runtime hosts it, so a model author gets
 * every mistake listed at start-up rather than a crash at the first session.
 */

import type { ModelDefinition } from './definition.ts';
import { isSettingCommand, withSettingCommands, type SettingsMap } from './settings.ts';

export class ModelDefinitionError extends TypeError {
  override readonly name = 'ModelDefinitionError';
  readonly problems: readonly string[];

  constructor(source: string, problems: readonly string[]) {
    super(`${source} is not a valid Arclight model:\n  - ${problems.join('\n  - ')}`);
    this.problems = problems;
  }
}

const SLUG = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
/** Message types follow command names: they travel as the same `type` field. */
const MESSAGE_TYPE = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

export function validateModelDefinition(value: unknown, source: string): ModelDefinition<unknown> {
  const problems: string[] = [];
  if (typeof value !== 'object' || value === null) {
    throw new ModelDefinitionError(source, ['the module must default-export defineModel({...}) (an object); got ' + typeof value]);
  }
  const model = value as Record<string, unknown>;
  if (typeof model['name'] !== 'string' || !SLUG.test(model['name'])) {
    problems.push('name must be a slug: lower-case letters, digits, ".", "_" or "-", at most 64 characters');
  }
  if (typeof model['fps'] !== 'number' || !(model['fps'] > 0 && model['fps'] <= 240)) problems.push('fps must be a number in (0, 240]');
  if (model['latencyMode'] !== undefined && model['latencyMode'] !== 'realtime' && model['latencyMode'] !== 'smooth') {
    problems.push('latencyMode must be "realtime" or "smooth"');
  }
  const tracks = model['tracks'];
  if (!Array.isArray(tracks)) {
    problems.push('tracks must be an array');
  } else {
    const seen = new Set<string>();
    tracks.forEach((track: Record<string, unknown>, index) => {
      const where = `tracks[${index}]`;
      if (typeof track !== 'object' || track === null) return problems.push(`${where} must be an object`);
      const name = track['name'];
      if (typeof name !== 'string' || !NAME.test(name)) problems.push(`${where}.name must be letters, digits, "_", "." or "-"`);
      else if (seen.has(name)) problems.push(`${where}.name "${name}" is used twice`);
      else seen.add(name);
      if (track['kind'] !== 'video' && track['kind'] !== 'audio') problems.push(`${where}.kind must be "video" or "audio"`);
      if (track['direction'] !== 'sendonly' && track['direction'] !== 'recvonly') {
        problems.push(`${where}.direction must be "recvonly" (model output) or "sendonly" (model input)`);
      }
      if (track['kind'] === 'video' && track['direction'] === 'recvonly') {
        for (const key of ['width', 'height'] as const) {
          const size = track[key];
          if (typeof size !== 'number' || !Number.isInteger(size) || size < 16 || size > 4096 || size % 2 !== 0) {
            problems.push(`${where}.${key} must be an even integer from 16 to 4096`);
          }
        }
      }
      if (track['dropPolicy'] !== undefined && !['block', 'drop-oldest', 'drop-newest'].includes(track['dropPolicy'] as string)) {
        problems.push(`${where}.dropPolicy must be "block", "drop-oldest" or "drop-newest"`);
      }
      if (
        track['queueFrames'] !== undefined &&
        !(Number.isInteger(track['queueFrames']) && (track['queueFrames'] as number) >= 1 && (track['queueFrames'] as number) <= 300)
      ) {
        problems.push(`${where}.queueFrames must be an integer from 1 to 300`);
      }
      if (track['fps'] !== undefined) {
        const at = `${where}.fps`;
        const fps = track['fps'];
        if (!(track['kind'] === 'video' && track['direction'] === 'recvonly'))
          problems.push(`${at}: only output video tracks are paced (adaptive fps)`);
        else if (fps !== 'adaptive') {
          if (typeof fps !== 'object' || fps === null || Array.isArray(fps))
            problems.push(`${at} must be "adaptive" or { min?, max? } (fps)`);
          else {
            const { min, max, ...rest } = fps as Record<string, unknown>;
            const ceiling = typeof model['fps'] === 'number' ? model['fps'] : 240;
            if (Object.keys(rest).length > 0) problems.push(`${at} has unknown keys: ${Object.keys(rest).join(', ')} (known: min, max)`);
            if (min !== undefined && !(typeof min === 'number' && min > 0 && min <= ceiling))
              problems.push(`${at}.min must be a number in (0, ${ceiling}] (the model's fps)`);
            if (max !== undefined && !(typeof max === 'number' && max > 0 && max <= ceiling))
              problems.push(`${at}.max must be a number in (0, ${ceiling}] (the model's fps)`);
            if (typeof min === 'number' && typeof max === 'number' && min > max) problems.push(`${at}.min must not exceed ${at}.max`);
          }
        }
      }
      if (
        track['kind'] === 'video' &&
        track['direction'] === 'sendonly' &&
        track['format'] !== undefined &&
        track['format'] !== 'i420' &&
        track['format'] !== 'rgba'
      ) {
        problems.push(`${where}.format must be "i420" or "rgba"`);
      }
      if (track['kind'] === 'audio' && track['channels'] !== undefined && track['channels'] !== 1 && track['channels'] !== 2) {
        problems.push(`${where}.channels must be 1 or 2`);
      }
      return undefined;
    });
  }
  const commands = model['commands'];
  if (commands !== undefined) {
    if (typeof commands !== 'object' || commands === null) problems.push('commands must be an object of name → command(...)');
    else {
      for (const [name, spec] of Object.entries(commands)) {
        if (!/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/.test(name))
          problems.push(`command name "${name}" must be an identifier (letters, digits, "_", "." or "-")`);
        if (typeof (spec as { handler?: unknown })?.handler !== 'function') problems.push(`commands.${name}.handler must be a function`);
      }
    }
  }
  const settings = model['settings'];
  if (settings !== undefined) {
    if (typeof settings !== 'object' || settings === null || Array.isArray(settings))
      problems.push('settings must be an object of name → { type, default, … } (a JSON Schema with a default)');
    else {
      for (const [name, spec] of Object.entries(settings)) {
        const where = `settings.${name}`;
        if (!/^[A-Za-z_][A-Za-z0-9_]{0,59}$/.test(name))
          problems.push(`setting name "${name}" must be an identifier (letters, digits, "_")`);
        if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
          problems.push(`${where} must be a JSON Schema with a default ({ type, default, … })`);
          continue;
        }
        const { default: value, description, moderated } = spec as Record<string, unknown>;
        if (value === undefined) problems.push(`${where}.default is required (each session starts from it)`);
        if (description !== undefined && typeof description !== 'string') problems.push(`${where}.description must be a string`);
        if (moderated !== undefined && typeof moderated !== 'boolean') problems.push(`${where}.moderated must be a boolean`);
        if (moderated === true && (spec as Record<string, unknown>)['type'] !== 'string')
          problems.push(`${where}.moderated: only string settings are moderated`);
        const written =
          typeof commands === 'object' && commands !== null ? (commands as Record<string, unknown>)[`set_${name}`] : undefined;
        if (written !== undefined && !isSettingCommand(written, name)) {
          problems.push(
            `commands.set_${name} clashes with the command generated for settings.${name}: remove one (a setting's command is set_<name>)`,
          );
        }
      }
    }
  }
  const messages = model['messages'];
  if (messages !== undefined) {
    if (typeof messages !== 'object' || messages === null || Array.isArray(messages))
      problems.push('messages must be an object of message type → { description?, schema? }');
    else {
      for (const [type, spec] of Object.entries(messages)) {
        if (!MESSAGE_TYPE.test(type)) problems.push(`message type "${type}" must be an identifier (letters, digits, "_", "." or "-")`);
        if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
          problems.push(`messages.${type} must be an object ({ description?, schema? })`);
          continue;
        }
        const { description, schema } = spec as Record<string, unknown>;
        if (description !== undefined && typeof description !== 'string') problems.push(`messages.${type}.description must be a string`);
        if (
          schema !== undefined &&
          typeof schema !== 'boolean' &&
          (typeof schema !== 'object' || schema === null || Array.isArray(schema))
        ) {
          problems.push(`messages.${type}.schema must be a JSON Schema (an object or a boolean)`);
        }
      }
    }
  }
  const hooks = model['hooks'];
  if (hooks !== undefined) {
    const known = ['connected', 'disconnected', 'session_started', 'session_ended', 'file_uploaded'];
    if (typeof hooks !== 'object' || hooks === null) problems.push('hooks must be an object');
    else {
      for (const [name, fn] of Object.entries(hooks)) {
        if (!known.includes(name)) problems.push(`hooks.${name} is not a hook (known: ${known.join(', ')})`);
        else if (typeof fn !== 'function') problems.push(`hooks.${name} must be a function`);
      }
    }
  }
  for (const key of ['load', 'unload', 'run', 'createSessionState', 'generate', 'beforeStep', 'onStepError'] as const) {
    if (model[key] !== undefined && typeof model[key] !== 'function') problems.push(`${key} must be a function`);
  }
  if (model['run'] !== undefined && model['generate'] !== undefined) {
    problems.push('a model has run (a loop of its own) or generate (steps the runtime calls), not both');
  }
  for (const key of ['beforeStep', 'onStepError'] as const) {
    if (model[key] !== undefined && model['generate'] === undefined) problems.push(`${key} is a step hook: it needs generate`);
  }
  if (problems.length > 0) throw new ModelDefinitionError(source, problems);
  if (settings === undefined) return value as ModelDefinition<unknown>;
  // A definition not made by defineModel (a plain object) gets its settings' commands here too.
  return {
    ...model,
    commands: withSettingCommands(model['commands'] as never, settings as SettingsMap),
  } as unknown as ModelDefinition<unknown>;
}
