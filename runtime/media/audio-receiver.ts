/** Decodes one connection's incoming Opus RTP for a model input audio track. */

import type { Logger } from '../../server-kit/log.ts';
import type { AudioFrame } from './frames.ts';
import { OpusDecoder } from './opus.ts';
import type { RtpInput } from './video-receiver.ts';

export class AudioReceiver {
  readonly #decoder: Promise<OpusDecoder>;
  readonly #deliver: (frame: AudioFrame) => void;
  readonly #log: Logger;
  #chain: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: { channels: 1 | 2; deliver: (frame: AudioFrame) => void; log: Logger }) {
    this.#decoder = OpusDecoder.create({ sampleRate: 48_000, channels: options.channels });
    this.#decoder.catch((error: unknown) => options.log.error('opus decoder could not open', { error }));
    this.#deliver = options.deliver;
    this.#log = options.log;
  }

  push(packet: RtpInput): void {
    if (this.#closed || packet.payload.length === 0) return;
    const payload = packet.payload;
    this.#chain = this.#chain.then(async () => {
      try {
        const decoder = await this.#decoder;
        this.#deliver(await decoder.decode(payload));
      } catch (error) {
        this.#log.debug('input audio packet could not be decoded', { error });
      }
    });
  }

  close(): void {
    this.#closed = true;
    void this.#chain
      .then(() => this.#decoder)
      .then(
        (d) => d.close(),
        () => {},
      );
  }
}
