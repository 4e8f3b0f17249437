/**
 * A runtime as the coordinator sees one, without a model or WebRTC: it registers, heartbeats to
 * random coordinator replicas every 100–200 ms, accepts starts (`POST /hosted/sessions`) into its
 * slots, answers ends (`DELETE /hosted/sessions/:id`), and — as configured — reports each session
 * ready at once and/or ends it itself after a short life. It records what a real runtime would
 * suffer from a coordinator's mistakes: a second start of a session it holds, a session started
 * on two runtimes, a start arriving while all its slots are held. For placement and housekeeping
 * tests that need many runtimes (test/coordinator/placement-stress.test.ts,
 * housekeeper-failover.test.ts).
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const STUB_CAPABILITIES = {
  protocol_version: '1.0',
  tracks: [{ name: 'main_video', kind: 'video', direction: 'recvonly' }],
  commands: [],
  emission_fps: 30,
};

export const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
export const between = (low: number, high: number): number => low + Math.random() * (high - low);
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What the stub runtimes saw, shared by all of them. */
export interface StubObservations {
  /** Starts received per session id. */
  readonly starts: Map<string, number>;
  /** Runtimes each session was started on. */
  readonly startedOn: Map<string, Set<string>>;
  /** A start for a session already open on that runtime. */
  duplicateStarts: number;
  /** A start that arrived while every slot of that runtime was held. */
  occupiedStarts: number;
  /** Heartbeats answered 404 (the runtime had been declared gone; it registered again). */
  declaredGone: number;
}

export function newObservations(): StubObservations {
  return { starts: new Map(), startedOn: new Map(), duplicateStarts: 0, occupiedStarts: 0, declaredGone: 0 };
}

export interface StubRuntimeOptions {
  readonly id: string;
  /** Coordinator URLs; each call goes to one at random. */
  readonly replicas: () => readonly string[];
  readonly secret: string;
  readonly slots: number;
  readonly observed: StubObservations;
  /** Report each session ready as soon as it starts (its meter starts). */
  readonly reportReady?: boolean;
  /** The share of sessions it ends itself (0–1), after a life drawn from `lifeMs`. */
  readonly selfEndShare?: number;
  readonly lifeMs?: readonly [number, number];
  /** Milliseconds between heartbeats, drawn per beat (default 100–200: the stress tests' pace). */
  readonly heartbeatEveryMs?: readonly [number, number];
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  try {
    return JSON.parse(text || '{}') as Record<string, unknown>;
  } catch {
    return {};
  }
}

export class StubRuntime {
  readonly open = new Set<string>();
  /** Sessions ended here before their start arrived: a late start is refused, as the runtime does. */
  readonly #ended = new Set<string>();
  readonly #options: StubRuntimeOptions;
  #server: Server | undefined;
  #url = '';
  #stopped = false;
  #heartbeats: Promise<void> | undefined;

  constructor(options: StubRuntimeOptions) {
    this.#options = options;
  }

  get id(): string {
    return this.#options.id;
  }

  async start(): Promise<void> {
    this.#server = createServer((request, response) => void this.#serve(request, response));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    await this.#register();
    this.#heartbeats = this.#heartbeatLoop();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#heartbeats;
    await new Promise((resolve) => this.#server?.close(resolve));
  }

  #post(path: string, body: unknown): Promise<Response | undefined> {
    return fetch(`${pick(this.#options.replicas())}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'Arclight-Runtime-Secret': this.#options.secret },
      body: JSON.stringify(body),
    }).then(
      async (response) => {
        await response.arrayBuffer();
        return response;
      },
      () => undefined,
    );
  }

  async #register(): Promise<void> {
    const { id, slots } = this.#options;
    for (;;) {
      const response = await this.#post('/runtimes', { id, url: this.#url, model: 'pattern', slots, capabilities: STUB_CAPABILITIES });
      if (response?.ok) return;
      if (this.#stopped) return;
      await sleep(100); // a replica that was just killed: another one
    }
  }

  async #heartbeatLoop(): Promise<void> {
    while (!this.#stopped) {
      const [low, high] = this.#options.heartbeatEveryMs ?? [100, 200];
      await sleep(between(low, high));
      const response = await this.#post(`/runtimes/${this.#options.id}/heartbeat`, { draining: false });
      if (response?.status === 404) {
        // Declared gone (silent too long on a loaded machine): what it held is over.
        this.#options.observed.declaredGone++;
        this.open.clear();
        await this.#register();
      }
    }
  }

  async #serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const answer = (status: number, value: unknown): void => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    };
    const { observed, slots } = this.#options;
    if (request.method === 'POST' && request.url === '/hosted/sessions') {
      const sessionId = String((await readJson(request))['session_id']);
      observed.starts.set(sessionId, (observed.starts.get(sessionId) ?? 0) + 1);
      observed.startedOn.set(sessionId, (observed.startedOn.get(sessionId) ?? new Set()).add(this.id));
      if (this.#ended.has(sessionId)) {
        answer(410, { code: 'session_ended', message: `Session ${sessionId} has ended; it is not opened again.` });
        return;
      }
      if (this.open.has(sessionId)) observed.duplicateStarts++;
      else if (this.open.size >= slots) observed.occupiedStarts++;
      this.open.add(sessionId);
      answer(200, { session_id: sessionId });
      if (this.#options.reportReady) void this.#post(`/runtimes/${this.id}/sessions/${encodeURIComponent(sessionId)}/ready`, {});
      if (Math.random() < (this.#options.selfEndShare ?? 0)) {
        const [low, high] = this.#options.lifeMs ?? [20, 250];
        setTimeout(() => void this.#endItself(sessionId), between(low, high));
      }
      return;
    }
    const ended = /^\/hosted\/sessions\/([^/]+)$/.exec(request.url ?? '');
    if (request.method === 'DELETE' && ended) {
      await readJson(request);
      const sessionId = decodeURIComponent(ended[1]!);
      if (this.open.delete(sessionId)) answer(200, { session_id: sessionId, state: 'CLOSED' });
      else {
        this.#ended.add(sessionId);
        answer(404, { code: 'session_not_found', message: 'No such session.' });
      }
      return;
    }
    answer(404, { code: 'not_found', message: 'No such route.' });
  }

  /** The slot is free here first, then the coordinator hears of it (as a real runtime does). */
  async #endItself(sessionId: string): Promise<void> {
    if (!this.open.delete(sessionId)) return;
    await this.#post(`/runtimes/${this.id}/sessions/${encodeURIComponent(sessionId)}/ended`, { reason: 'the model finished' });
  }
}
