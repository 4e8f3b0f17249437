/**
 * `downloadClipAsFile()`: fetches a clip's HLS playlist, its init segment and media segments, and
 * joins them into one MP4 (fMP4: the init segment followed by its fragments is itself a playable
 * file — no remuxing). In a browser, a non-null `filename` also saves it (an `<a download>`).
 */

import { ArclightError } from '../protocol/errors.ts';
import type { Clip } from './client-types.ts';
import { errorFromResponse } from './http-errors.ts';
import { resolveToken, type TokenSource } from './token.ts';

export interface DownloadClipOptions {
  /** Sent as the bearer (the hosted service may ask for it); presigned URLs need none. */
  readonly jwt?: TokenSource;
  readonly signal?: AbortSignal;
  /** After each file: how many of `total` files are in, and the bytes so far. */
  readonly onProgress?: (fetched: number, total: number, bytes: number) => void;
}

export const DEFAULT_CLIP_FILENAME = 'arclight-clip.mp4';

export async function downloadClipAsFile(
  clip: Pick<Clip, 'playlistUrl'>,
  filename: string | null = DEFAULT_CLIP_FILENAME,
  options: DownloadClipOptions = {},
): Promise<Blob> {
  const token = await resolveToken(options.jwt);
  const get = async (url: string): Promise<Response> => {
    let response: Response;
    try {
      response = await fetch(url, {
        ...(token ? { headers: { Authorization: `Bearer ${token}` } } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new ArclightError('connection_failed', `Could not fetch ${url}: ${(error as Error).message}`, { cause: error });
    }
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  };
  const playlist = await (await get(clip.playlistUrl)).text();
  const urls = parsePlaylistUrls(playlist, clip.playlistUrl);
  const parts: ArrayBuffer[] = [];
  let bytes = 0;
  for (const url of urls) {
    const part = await (await get(url)).arrayBuffer();
    parts.push(part);
    bytes += part.byteLength;
    options.onProgress?.(parts.length, urls.length, bytes);
  }
  // A clip's fragments keep their times in the recording (a clip of its last 5 s starts at, say,
  // 40 s); as a file it should start at 0, so every fragment's decode time is shifted back.
  rebaseFragments(parts.slice(1).map((p) => new Uint8Array(p)));
  const blob = new Blob(parts, { type: 'video/mp4' });
  if (filename !== null) saveInBrowser(blob, filename);
  return blob;
}

/** The init segment's URL then every media segment's, resolved against the playlist's URL. */
export function parsePlaylistUrls(playlist: string, base: string): string[] {
  const lines = playlist.split(/\r?\n/).map((l) => l.trim());
  if (lines[0] !== '#EXTM3U') throw new ArclightError('recording_error', 'The clip playlist is not an HLS playlist.');
  const map = lines.map((l) => /^#EXT-X-MAP:.*URI="([^"]+)"/.exec(l)?.[1]).find((u) => u !== undefined);
  if (!map) throw new ArclightError('recording_error', 'The clip playlist has no init segment (EXT-X-MAP).');
  const segments = lines.filter((l) => l !== '' && !l.startsWith('#'));
  return [map, ...segments].map((u) => new URL(u, base).href);
}

function saveInBrowser(blob: Blob, filename: string): void {
  const doc = (globalThis as { document?: Document }).document;
  if (!doc || typeof URL.createObjectURL !== 'function') return; // Node: the Blob is the result
  const url = URL.createObjectURL(blob);
  const anchor = doc.createElement('a');
  anchor.href = url;
  anchor.download = filename;
  anchor.style.display = 'none';
  doc.body.appendChild(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Shifts every fragment's `tfdt` (track fragment decode time) so the first starts at 0. Edits the
 * buffers in place; boxes are walked by their sizes (moof → traf → tfdt), nothing else changes.
 */
export function rebaseFragments(fragments: readonly Uint8Array[]): void {
  let base: bigint | undefined;
  for (const fragment of fragments) {
    const view = new DataView(fragment.buffer, fragment.byteOffset, fragment.byteLength);
    for (const moof of childBoxes(view, 0, fragment.byteLength, 'moof')) {
      for (const traf of childBoxes(view, moof.start + 8, moof.end, 'traf')) {
        for (const tfdt of childBoxes(view, traf.start + 8, traf.end, 'tfdt')) {
          const version = view.getUint8(tfdt.start + 8);
          const at = tfdt.start + 12;
          const time = version === 1 ? view.getBigUint64(at) : BigInt(view.getUint32(at));
          base ??= time;
          const shifted = time - base;
          if (version === 1) view.setBigUint64(at, shifted);
          else view.setUint32(at, Number(shifted));
        }
      }
    }
  }
}

function* childBoxes(view: DataView, from: number, to: number, type: string): Generator<{ start: number; end: number }> {
  for (let at = from; at + 8 <= to;) {
    const size = view.getUint32(at);
    if (size < 8 || at + size > to) return; // not a box we can walk (64-bit sizes are not used here)
    const name = String.fromCharCode(view.getUint8(at + 4), view.getUint8(at + 5), view.getUint8(at + 6), view.getUint8(at + 7));
    if (name === type) yield { start: at, end: at + size };
    at += size;
  }
}
