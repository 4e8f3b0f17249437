/**
 * `arclight/protocol` — everything that crosses an Arclight wire: REST bodies, data-channel
 * messages, error codes and version headers, as TypeScript types and JSON Schemas.
 * runtime/, coordinator/ and client/ import this module; it imports none of them.
 *
 * @example
 * ```ts
 * import { envelope, type SessionResponse } from 'arclight/protocol';
 * channel.send(JSON.stringify(envelope('application', { type: 'set_speed', data: { speed: 2 }, request_id: 'r1' })));
 * ```
 */
export * from './errors.ts';
export * from './versions.ts';
export * from './capabilities.ts';
export * from './json-schema.ts';
export * from './session.ts';
export * from './coordinator.ts';
export * from './transport.ts';
export * from './messages.ts';
export * from './schemas.ts';
export * from './frame-metadata.ts';
export * from './uploads.ts';
export * from './moderation.ts';
export * from './session-logs.ts';
export * from './server-sent-events.ts';
export * from './schema-hash.ts';
export { sha256Hex } from './sha256.ts';
