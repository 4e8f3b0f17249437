/** What a model offers, as a client sees it after connecting. */

import type { JsonSchema } from './json-schema.ts';

export type TrackKind = 'video' | 'audio';
/**
 * Direction from the client's point of view, as on the wire:
 * `sendonly` = client → model (a model input), `recvonly` = model → client (a model output).
 */
export type TrackDirection = 'sendonly' | 'recvonly';

export interface TrackCapability {
  readonly name: string;
  readonly kind: TrackKind;
  readonly direction: TrackDirection;
  /** Arclight extension: the output resolution of a video track. */
  readonly width?: number;
  readonly height?: number;
  /** Arclight extension: audio sample rate and channel count. */
  readonly sample_rate?: number;
  readonly channels?: number;
}

export interface CommandCapability {
  readonly name: string;
  /** Required by 2.9.0's parser; empty string when the model gives none. */
  readonly description: string;
  /** JSON Schema of the command's `data`. */
  readonly schema?: JsonSchema;
  /** Arclight extension: the reply message type and its JSON Schema, when the command replies. */
  readonly reply?: { readonly type: string; readonly schema?: JsonSchema };
}

/** Arclight extension: a message type the model declares it sends (model → client). */
export interface MessageCapability {
  readonly type: string;
  readonly description?: string;
  /** JSON Schema of the message's `data`, when declared. */
  readonly schema?: JsonSchema;
}

export interface Capabilities {
  readonly protocol_version: string;
  readonly tracks: readonly TrackCapability[];
  readonly commands?: readonly CommandCapability[];
  readonly emission_fps?: number | null;
  /** Arclight extension: the message types the model declares (absent when it declares none). */
  readonly messages?: readonly MessageCapability[];
  /** Arclight extension: the model's schema hash (protocol/schema-hash.ts), for drift warnings. */
  readonly schema_hash?: string;
}
