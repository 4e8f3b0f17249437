/**
 * The live size of a V8 heap snapshot: the sum of every node's self size. After a forced GC,
 * `process.memoryUsage().heapUsed` still moves by hundreds of KiB between identical states (page
 * fragmentation, free-list slack), which hides a slow leak at the scale of bytes per session; the
 * snapshot counts only objects reachable from the roots, so it is what a leak check compares.
 */

import { readFileSync } from 'node:fs';

interface HeapSnapshotFile {
  readonly snapshot: { readonly meta: { readonly node_fields: readonly string[] } };
  readonly nodes: readonly number[];
}

export function liveHeapBytes(snapshotPath: string): number {
  const file = JSON.parse(readFileSync(snapshotPath, 'utf8')) as HeapSnapshotFile;
  const fields = file.snapshot.meta.node_fields;
  const stride = fields.length;
  const selfSize = fields.indexOf('self_size');
  if (selfSize < 0) throw new Error(`${snapshotPath}: no self_size field`);
  let total = 0;
  for (let i = selfSize; i < file.nodes.length; i += stride) total += file.nodes[i]!;
  return total;
}
