/**
 * The black keyframe a viewer's picture opens on (and a flush shows): one per stream, encoded by
 * its own encoder and packetized, so it is a self-contained picture with its own parameter sets.
 *
 * Cached for the whole process by stream and size: the same for every session, and opening an
 * encoder for it blocks the event loop ~13 ms at 720p on this project's 2-core machine — paid
 * once, not in every connect. A track keeps its own handle on each stream's (`TrackBlackKeyframes`).
 * A failed encode is not kept, in either cache: the next asks again.
 */
import type { EncoderBackendRegistry } from './encoder-backends.ts';
import { solidI420 } from './frame-convert.ts';
import { streamEncoders } from './video-encoder-factory.ts';
import { createPacketizer, streamFormat, type VideoStreamKey } from './video-stream-key.ts';

/** Process-wide: a black picture of a given stream and size never changes. */
const blackKeyframes = new Map<string, Promise<Buffer[]>>();

/** One track's black keyframes, by stream. */
export class TrackBlackKeyframes {
  readonly #width: number;
  readonly #height: number;
  readonly #fps: number;
  readonly #backends: EncoderBackendRegistry;
  readonly #byStream = new Map<VideoStreamKey, Promise<Buffer[]>>();

  constructor(width: number, height: number, fps: number, backends: EncoderBackendRegistry) {
    this.#width = width;
    this.#height = height;
    this.#fps = fps;
    this.#backends = backends;
  }

  /** The black keyframe of a stream, encoded once per codec by its own encoder (a failed encode is not kept: the next asks again). */
  payloads(key: VideoStreamKey): Promise<Buffer[]> {
    let black = this.#byStream.get(key);
    if (!black) {
      black = processBlackKeyframe(key, this.#width, this.#height, this.#fps, this.#backends);
      const encoding = black;
      this.#byStream.set(key, encoding);
      encoding.catch(() => {
        if (this.#byStream.get(key) === encoding) this.#byStream.delete(key);
      });
    }
    return black;
  }
}

function processBlackKeyframe(
  key: VideoStreamKey,
  width: number,
  height: number,
  fps: number,
  backends: EncoderBackendRegistry,
): Promise<Buffer[]> {
  const id = `${key} ${width}x${height}@${fps}`;
  let black = blackKeyframes.get(id);
  if (!black) {
    const encoding = encodeBlackKeyframe(key, width, height, fps, backends);
    black = encoding;
    blackKeyframes.set(id, encoding);
    encoding.catch(() => {
      if (blackKeyframes.get(id) === encoding) blackKeyframes.delete(id);
    });
  }
  return black;
}

async function encodeBlackKeyframe(
  key: VideoStreamKey,
  width: number,
  height: number,
  fps: number,
  backends: EncoderBackendRegistry,
): Promise<Buffer[]> {
  const format = streamFormat(key);
  const encoder = await streamEncoders.open({ ...format, width, height, fps }, backends);
  try {
    encoder.requestKeyframe();
    const [unit] = await encoder.encode(solidI420(width, height, 16, 128, 128));
    if (!unit) throw new Error('encoder produced no black frame');
    return createPacketizer(format.codec).packetize(unit.data);
  } finally {
    encoder.close();
  }
}
