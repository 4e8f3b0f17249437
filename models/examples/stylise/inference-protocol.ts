/** Messages between the stylise engine (main thread) and its inference worker. */

import type { PixelFormat } from 'arclight/runtime';

export interface WorkerData {
  /** The network's ONNX bytes. */
  readonly model: Uint8Array;
  /** Execution providers to try, in order, one at a time (each with the CPU behind it). */
  readonly providers: readonly string[];
}

export interface ProviderFailure {
  readonly provider: string;
  readonly message: string;
}

/** A webcam frame, its bytes moved to the worker (and back in the reply). */
export interface FrameMessage {
  readonly width: number;
  readonly height: number;
  readonly format: PixelFormat;
  readonly data: Uint8Array;
}

export interface RunRequest {
  readonly type: 'run';
  readonly id: number;
  readonly frame: FrameMessage;
  /** Side of the square the network sees. */
  readonly size: number;
  readonly strength: number;
}

export type WorkerReply =
  | { readonly type: 'ready'; readonly provider: string; readonly failures: readonly ProviderFailure[] }
  | { readonly type: 'failed'; readonly failures: readonly ProviderFailure[] }
  | {
      readonly type: 'result';
      readonly id: number;
      /** [1,3,size,size] RGB CHW in 0–1. */
      readonly output: Float32Array;
      /** The request's frame bytes, handed back for reuse. */
      readonly frameData: Uint8Array;
      /** frame → tensor on the worker. */
      readonly prepareMs: number;
      /** ort `session.run()` alone. */
      readonly runMs: number;
    }
  | { readonly type: 'error'; readonly id: number; readonly message: string; readonly frameData: Uint8Array };
