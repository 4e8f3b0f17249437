/**
 * An HTTP reverse proxy in front of a WebRTC server's signalling (an Arclight runtime or
 * coordinator, or any server that carries SDP in JSON) that puts the network lab's relay into the
 * negotiated path: in JSON request bodies every SDP and candidate string is rewritten as the
 * client's (`rewriteClientSdp`), in JSON response bodies as the server's (`rewriteServerSdp`). Any other
 * body (HTML, scripts, event streams) passes through untouched, streamed.
 *
 * It knows no endpoint of any protocol: a string is SDP when it starts with `v=0`, a candidate
 * when it starts with `candidate:` (the shapes every WebRTC signalling JSON carries).
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';

/** What the proxy needs of the lab: the four rewrites. */
export interface SdpRewriter {
  rewriteClientSdp(sdp: string): Promise<string>;
  rewriteServerSdp(sdp: string): Promise<string>;
  rewriteClientCandidate(candidate: string): Promise<string | undefined>;
  rewriteServerCandidate(candidate: string): Promise<string | undefined>;
}

export interface SignallingProxyOptions {
  readonly targetUrl: string;
  readonly listenAddress: string;
  readonly lab: SdpRewriter;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-encoding', 'host', 'upgrade']);

/** `value` with every SDP and candidate string rewritten by `sdp` and `candidate` (removed candidates become ''). */
export async function rewriteJson(
  value: Json,
  sdp: (text: string) => Promise<string>,
  candidate: (text: string) => Promise<string | undefined>,
): Promise<Json> {
  if (typeof value === 'string') {
    if (value.startsWith('v=0')) return sdp(value);
    if (/^(a=)?candidate:/.test(value)) return (await candidate(value)) ?? '';
    return value;
  }
  if (Array.isArray(value)) {
    const items = await Promise.all(value.map((item) => rewriteJson(item, sdp, candidate)));
    // A candidate entry whose string was removed is dropped from its list.
    return items.filter((item, i) => !(isCandidateEntry(value[i]!) && isEmptyCandidate(item)));
  }
  if (value !== null && typeof value === 'object') {
    const entries = await Promise.all(
      Object.entries(value).map(async ([key, item]) => [key, await rewriteJson(item, sdp, candidate)] as const),
    );
    return Object.fromEntries(entries);
  }
  return value;
}

const candidateOf = (value: Json): Json | undefined =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? value['candidate'] : value;
const isCandidateEntry = (value: Json): boolean => {
  const text = candidateOf(value);
  return typeof text === 'string' && /^(a=)?candidate:/.test(text);
};
const isEmptyCandidate = (value: Json): boolean => candidateOf(value) === '';

export class SignallingProxy {
  readonly #server: Server;
  readonly #target: URL;
  readonly #lab: SdpRewriter;
  /** Requests whose JSON bodies were rewritten, and responses. */
  rewrittenRequests = 0;
  rewrittenResponses = 0;

  private constructor(server: Server, options: SignallingProxyOptions) {
    this.#server = server;
    this.#target = new URL(options.targetUrl);
    this.#lab = options.lab;
  }

  static async start(options: SignallingProxyOptions): Promise<SignallingProxy> {
    const server = createServer();
    const proxy = new SignallingProxy(server, options);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      proxy.#handle(request, response).catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
        response.end(`network lab proxy: ${(error as Error).message}`);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, options.listenAddress, () => resolve());
    });
    return proxy;
  }

  /** Where clients connect instead of the target (same paths). */
  get url(): string {
    const { address, port } = this.#server.address() as AddressInfo;
    return `http://${address}:${port}`;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    let body: Uint8Array<ArrayBuffer> | string | undefined = chunks.length ? new Uint8Array(Buffer.concat(chunks)) : undefined;
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || HOP_HEADERS.has(name)) continue;
      for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
    }
    if (body && isJson(request.headers['content-type'])) {
      body = JSON.stringify(
        await rewriteJson(
          JSON.parse(Buffer.from(body).toString('utf8')) as Json,
          (sdp) => this.#lab.rewriteClientSdp(sdp),
          (c) => this.#lab.rewriteClientCandidate(c),
        ),
      );
      this.rewrittenRequests++;
    }
    const upstream = await fetch(new URL(request.url ?? '/', this.#target), {
      method: request.method ?? 'GET',
      headers,
      ...(body === undefined ? {} : { body }),
      redirect: 'manual',
    });
    const responseHeaders: Record<string, string> = {};
    upstream.headers.forEach((value, name) => {
      if (!HOP_HEADERS.has(name)) responseHeaders[name] = value;
    });
    if (isJson(upstream.headers.get('content-type') ?? undefined)) {
      const text = await upstream.text();
      let out = text;
      if (text.length > 0) {
        out = JSON.stringify(
          await rewriteJson(
            JSON.parse(text) as Json,
            (sdp) => this.#lab.rewriteServerSdp(sdp),
            (c) => this.#lab.rewriteServerCandidate(c),
          ),
        );
        this.rewrittenResponses++;
      }
      response.writeHead(upstream.status, responseHeaders);
      response.end(out);
      return;
    }
    response.writeHead(upstream.status, responseHeaders);
    if (upstream.body === null) {
      response.end();
      return;
    }
    const stream = Readable.fromWeb(upstream.body as unknown as WebReadableStream<Uint8Array>);
    response.on('close', () => stream.destroy());
    stream.pipe(response);
  }
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /\bjson\b/i.test(contentType);
}
