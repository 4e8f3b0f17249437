/**
 * JSON lines over a worker's control socket: `send` writes one object per line; each complete
 * line that arrives is parsed and handed to `onMessage` (a line that is not a protocol message
 * goes to `onInvalid`). Frame bytes never pass here (frame-ring.ts).
 */

import type { Duplex } from 'node:stream';
import { parseWorkerMessage, type WorkerMessage } from './worker-protocol.ts';

/** A line longer than this is a broken worker, not a message (messages carry no frame bytes). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;

export class ControlChannel {
  readonly #socket: Duplex;
  #pending = '';
  #closed = false;

  constructor(socket: Duplex, handlers: { onMessage(message: WorkerMessage): void; onInvalid(line: string): void; onClose(): void }) {
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.#pending += chunk;
      let newline: number;
      while ((newline = this.#pending.indexOf('\n')) >= 0) {
        const line = this.#pending.slice(0, newline);
        this.#pending = this.#pending.slice(newline + 1);
        if (line.trim() === '') continue;
        const message = parseWorkerMessage(line);
        if (message) handlers.onMessage(message);
        else handlers.onInvalid(line);
      }
      if (this.#pending.length > MAX_LINE_BYTES) {
        handlers.onInvalid(this.#pending.slice(0, 200));
        this.#pending = '';
      }
    });
    socket.on('error', () => undefined); // the process's exit is what counts; 'close' follows
    socket.on('close', () => {
      this.#closed = true;
      handlers.onClose();
    });
  }

  /** Writes one message; false when the socket is already closed. */
  send(message: object): boolean {
    if (this.#closed || this.#socket.destroyed) return false;
    this.#socket.write(`${JSON.stringify(message)}\n`);
    return true;
  }

  close(): void {
    this.#closed = true;
    this.#socket.destroy();
  }
}
