import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionFilesOptionsFromFlags, type SessionFilesFlags } from './session-files-cli-options.ts';

describe('arclight serve upload and recording flags', () => {
  it('maps the flags to RuntimeOptions.uploads and .recording', () => {
    const result = sessionFilesOptionsFromFlags({
      'upload-max-bytes': '10M',
      'upload-mime-type': ['image/*', 'application/pdf'],
      'upload-max-files': '20',
      'upload-dir': 'data/uploads',
      'recording-dir': '/var/lib/arclight/recordings',
      'recording-track': 'overlay',
      'recording-segment-seconds': '2.5',
      'recording-bitrate': '4000',
      'recording-encoder': 'own',
      'max-clip-seconds': '60',
    });
    expect(result).toEqual({
      uploads: {
        maxBytes: 10 * 1024 * 1024,
        mimeTypes: ['image/*', 'application/pdf'],
        maxFilesPerSession: 20,
        directory: resolve('data/uploads'),
      },
      recording: {
        directory: '/var/lib/arclight/recordings',
        track: 'overlay',
        segmentSeconds: 2.5,
        bitrateKbps: 4000,
        encoder: 'own',
        maxClipSeconds: 60,
      },
    });
    expect(sessionFilesOptionsFromFlags({ 'upload-max-bytes': '1048576' })).toMatchObject({ uploads: { maxBytes: 1_048_576 } });
    expect(sessionFilesOptionsFromFlags({ 'upload-max-bytes': '2g' })).toMatchObject({ uploads: { maxBytes: 2 * 1024 ** 3 } });
  });

  it('no flags: recording on with its defaults, upload defaults; --no-recording: no recording', () => {
    expect(sessionFilesOptionsFromFlags({})).toEqual({ recording: {} });
    expect(sessionFilesOptionsFromFlags({ 'no-recording': true })).toEqual({});
    expect(sessionFilesOptionsFromFlags({ 'no-recording': true, 'upload-max-files': '3' })).toEqual({ uploads: { maxFilesPerSession: 3 } });
  });

  it('says what is wrong', () => {
    const error = (flags: SessionFilesFlags): string => {
      const result = sessionFilesOptionsFromFlags(flags);
      return 'error' in result ? result.error : 'no error';
    };
    for (const bad of ['0', '-1', '10MB', 'lots', '']) expect(error({ 'upload-max-bytes': bad })).toMatch(/--upload-max-bytes/);
    for (const bad of ['png', 'image/', '*/*x', 'image/png; charset=x'])
      expect(error({ 'upload-mime-type': [bad] })).toMatch(/--upload-mime-type/);
    for (const bad of ['0', '1.5', 'ten']) expect(error({ 'upload-max-files': bad })).toMatch(/--upload-max-files/);
    for (const bad of ['0', '-4', '61', 'four']) expect(error({ 'recording-segment-seconds': bad })).toMatch(/--recording-segment-seconds/);
    for (const bad of ['0', '2.5', 'fast']) expect(error({ 'recording-bitrate': bad })).toMatch(/--recording-bitrate/);
    for (const bad of ['', 'live', 'OWN']) expect(error({ 'recording-encoder': bad })).toMatch(/--recording-encoder must be shared or own/);
    // A clip is whole segments and never over the cap: the cap holds at least one.
    expect(error({ 'max-clip-seconds': '1' })).toMatch(/--max-clip-seconds must be at least the segment length \(2 s\)/);
    expect(error({ 'max-clip-seconds': '5', 'recording-segment-seconds': '6' })).toMatch(/at least the segment length \(6 s\)/);
    expect(error({ 'max-clip-seconds': '2' })).toBe('no error');
    for (const bad of ['0', '-1', 'forever']) expect(error({ 'max-clip-seconds': bad })).toMatch(/--max-clip-seconds/);
    expect(error({ 'recording-track': 'main video/../x' })).toMatch(/--recording-track/);
    // Recording settings with --no-recording would be ignored: refused instead.
    expect(error({ 'no-recording': true, 'max-clip-seconds': '30' })).toMatch(/--max-clip-seconds.*--no-recording/);
    expect(error({ 'no-recording': true, 'recording-dir': '/tmp/r' })).toMatch(/--recording-dir.*--no-recording/);
  });
});
