/** Receives a WebRTC audio track in Node (wrtc's RTCAudioSink) and measures its level. */
import { wrtc } from '../../client/node.ts';

interface AudioData {
  samples: Int16Array;
  sampleRate: number;
  channelCount: number;
}

export class AudioProbe {
  chunks = 0;
  #recent: number[] = [];
  readonly #sink: { stop(): void; ondata: ((data: AudioData) => void) | null };

  constructor(track: MediaStreamTrack) {
    const Sink = (wrtc as unknown as { nonstandard: { RTCAudioSink: new (t: MediaStreamTrack) => AudioProbe['_sink'] } }).nonstandard
      .RTCAudioSink;
    this.#sink = new Sink(track);
    this.#sink.ondata = (data) => {
      this.chunks++;
      let sum = 0;
      for (let i = 0; i < data.samples.length; i++) sum += data.samples[i]! * data.samples[i]!;
      this.#recent.push(Math.sqrt(sum / Math.max(1, data.samples.length)));
      if (this.#recent.length > 25) this.#recent.shift();
    };
  }

  declare readonly _sink: { stop(): void; ondata: ((data: AudioData) => void) | null };

  /** RMS of the last ~250 ms, in 16-bit sample units. */
  get level(): number {
    if (this.#recent.length === 0) return 0;
    return this.#recent.reduce((a, b) => a + b, 0) / this.#recent.length;
  }

  stop(): void {
    this.#sink.stop();
  }
}

/** A 10 ms-per-call sine source for wrtc's RTCAudioSource (48 kHz mono). */
export function startSine(frequency: number, amplitude: number): { track: MediaStreamTrack; stop(): void } {
  const Source = (
    wrtc as unknown as { nonstandard: { RTCAudioSource: new () => { createTrack(): MediaStreamTrack; onData(d: object): void } } }
  ).nonstandard.RTCAudioSource;
  const source = new Source();
  const track = source.createTrack();
  let phase = 0;
  const timer = setInterval(() => {
    const samples = new Int16Array(480);
    for (let i = 0; i < samples.length; i++) {
      samples[i] = Math.round(Math.sin(phase) * amplitude);
      phase += (2 * Math.PI * frequency) / 48_000;
    }
    source.onData({ samples, sampleRate: 48_000, bitsPerSample: 16, channelCount: 1, numberOfFrames: 480 });
  }, 10);
  return {
    track,
    stop: () => {
      clearInterval(timer);
      track.stop();
    },
  };
}
