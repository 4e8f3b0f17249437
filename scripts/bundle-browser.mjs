// Bundles client/browser.ts into one ES module for pages (the playground, browser tests).
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export async function bundleBrowserClient(outDir) {
  await build({
    entryPoints: { 'arclight-client': join(root, 'client', 'browser.ts') },
    outdir: outDir,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    sourcemap: true,
    logLevel: 'warning',
  });
}
