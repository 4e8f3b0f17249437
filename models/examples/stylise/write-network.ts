/**
 * Writes the stylise example's network to a file, for a look in Netron or `onnx.checker` (the
 * model itself builds the bytes in memory and needs no file):
 *
 *   node --import tsx models/examples/stylise/write-network.ts [out.onnx]     (default stylise.onnx)
 */

import { writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { buildStyliseNetwork } from './stylise-network.ts';

const path = process.argv[2] ?? 'stylise.onnx';
const bytes = buildStyliseNetwork();
writeFileSync(path, bytes);
process.stdout.write(`${path}: ${bytes.length} bytes, sha256 ${createHash('sha256').update(bytes).digest('hex')}\n`);
