/** An HLS (version 7, fMP4) VOD playlist for a clip: its init segment and media segments. */

import type { RecordedSegment } from './track-recorder.ts';

export function clipPlaylist(initUrl: string, segments: ReadonlyArray<RecordedSegment & { readonly url: string }>): string {
  const target = Math.max(1, ...segments.map((s) => Math.ceil(s.durationMs / 1000)));
  const lines = [
    '#EXTM3U',
    '#EXT-X-VERSION:7',
    `#EXT-X-TARGETDURATION:${target}`,
    `#EXT-X-MEDIA-SEQUENCE:${segments[0]?.sequence ?? 0}`,
    '#EXT-X-PLAYLIST-TYPE:VOD',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-MAP:URI="${initUrl}"`,
  ];
  for (const segment of segments) lines.push(`#EXTINF:${(segment.durationMs / 1000).toFixed(3)},`, segment.url);
  lines.push('#EXT-X-ENDLIST', '');
  return lines.join('\n');
}
