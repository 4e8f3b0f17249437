/**
 * The fMP4 writer against FFmpeg (node-av): H.264 from the runtime's own encoder, an init segment
 * and two media segments, joined into one file that FFmpeg demuxes with every sample at its time
 * and decodes frame for frame — what HLS players and a clip download rely on.
 */

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decoder, Demuxer } from 'node-av/api';
import { describe, expect, it } from 'vitest';
import { solidI420 } from '../media/frame-convert.ts';
import { VideoEncoder } from '../media/video-encoder-factory.ts';
import { AacEncoder } from './aac-encoder.ts';
import { AUDIO_TRACK_ID, TIMESCALE, VIDEO_TRACK_ID, initSegment, mediaSegment, parameterSets, splitAnnexB } from './fmp4.ts';

const W = 320;
const H = 240;
const FPS = 30;

describe('fMP4 (H.264)', () => {
  it('splits Annex-B with 3- and 4-byte start codes', () => {
    const au = Buffer.from([0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5, 6]);
    expect(splitAnnexB(au).map((u) => [...u])).toEqual([
      [0x67, 1, 2],
      [0x68, 3],
      [0x65, 4, 5, 6],
    ]);
  });

  it('init + segments (H.264 and AAC) form an MP4 that FFmpeg demuxes at the right times and decodes', async () => {
    const encoder = await VideoEncoder.create({ codec: 'h264', width: W, height: H, fps: FPS, profile: 'high' });
    const samples: Array<{ data: Buffer; keyframe: boolean; time: number; duration: number }> = [];
    const duration = TIMESCALE / FPS;
    for (let i = 0; i < 2 * FPS; i++) {
      if (i % FPS === 0) encoder.requestKeyframe(); // a segment per second
      const shade = 40 + i * 3;
      for (const unit of await encoder.encode(solidI420(W, H, shade, 128, 128))) {
        samples.push({ data: unit.data, keyframe: unit.keyframe, time: i * duration, duration });
      }
    }
    encoder.close();
    expect(samples.filter((s) => s.keyframe).length).toBe(2);
    const sets = parameterSets(samples[0]!.data)!;
    expect(sets.sps[0]! & 0x1f).toBe(7);
    // Two seconds of a 440 Hz tone, in 20 ms frames as the runtime produces them.
    const aac = await AacEncoder.create({ sampleRate: 48_000, channels: 1 });
    const audio: Array<{ data: Buffer; position: number }> = [];
    for (let f = 0; f < 100; f++) {
      const tone = Int16Array.from({ length: 960 }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * (f * 960 + i)) / 48_000)));
      audio.push(...(await aac.encode(tone)));
    }
    aac.close();
    expect(aac.config.length).toBeGreaterThanOrEqual(2);
    const first = audio[0]!.position;
    const audioOf = (from: number, to: number) => {
      const picked = audio.filter((p) => p.position - first >= from && p.position - first < to);
      return {
        trackId: AUDIO_TRACK_ID,
        time: picked[0]!.position - first,
        samples: picked.map((p) => ({ data: p.data, duration: 1024, keyframe: true })),
      };
    };
    const videoOf = (from: number, to: number) => ({
      trackId: VIDEO_TRACK_ID,
      time: samples[from]!.time,
      samples: samples.slice(from, to),
    });
    const file = Buffer.concat([
      initSegment({ video: { width: W, height: H, ...sets }, audio: { sampleRate: 48_000, channels: 1, config: aac.config } }),
      mediaSegment(1, [videoOf(0, FPS), audioOf(0, 48_000)]),
      mediaSegment(2, [videoOf(FPS, 2 * FPS), audioOf(48_000, 96_000)]),
    ]);
    const path = join(mkdtempSync(join(tmpdir(), 'fmp4-')), 'joined.mp4');
    writeFileSync(path, file);

    const demuxer = await Demuxer.open(path);
    const stream = demuxer.video()!;
    expect(stream.codecpar.width).toBe(W);
    expect(stream.codecpar.height).toBe(H);
    const sound = demuxer.audio()!;
    expect(sound.codecpar.sampleRate).toBe(48_000);
    const audioDecoder = await Decoder.create(sound);
    let audioPackets = 0;
    let audioDecoded = 0;
    const decoder = await Decoder.create(stream);
    const times: number[] = [];
    let decoded = 0;
    for (const packet of demuxer.packetsSync()) {
      if (!packet) continue;
      if (packet.streamIndex === sound.index) {
        audioPackets++;
        audioDecoded += (await audioDecoder.decodeAll(packet)).map((f) => f.free()).length;
        packet.free();
        continue;
      }
      times.push((Number(packet.pts) * stream.timeBase.num) / stream.timeBase.den);
      for (const frame of await decoder.decodeAll(packet)) {
        decoded++;
        frame.free();
      }
      packet.free();
    }
    for (const frame of await decoder.decodeAll(null)) {
      decoded++;
      frame.free();
    }
    await demuxer.close();
    expect(times).toHaveLength(2 * FPS);
    times.forEach((t, i) => expect(t).toBeCloseTo(i / FPS, 3));
    expect(decoded).toBe(2 * FPS);
    expect(audioPackets).toBeGreaterThanOrEqual(90); // ~2 s of 1024-sample AAC frames
    expect(audioDecoded).toBeGreaterThanOrEqual(audioPackets - 2);
  });
});
