/**
 * Builds the React bindings' test page (test/react/index.html + main.tsx) with Vite's JS API,
 * as an app would: `arclight/client` and `arclight/client/react` resolve to this checkout's
 * sources (as in vitest.config.ts), JSX compiles with React's automatic runtime, and React is
 * its development build, so `<StrictMode>` really mounts effects twice.
 */
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const src = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

export async function buildReactPage(outDir: string): Promise<void> {
  await build({
    configFile: false,
    root: src('.'),
    mode: 'development',
    logLevel: 'warn',
    resolve: {
      alias: [
        { find: /^arclight\/client$/, replacement: src('../../client/index.ts') },
        { find: /^arclight\/client\/react$/, replacement: src('../../client/react/index.ts') },
      ],
    },
    // vitest runs with NODE_ENV=test; the page wants React's development build (StrictMode's double effects).
    define: { 'process.env.NODE_ENV': JSON.stringify('development') },
    oxc: { jsx: { runtime: 'automatic' } },
    build: { outDir, emptyOutDir: true, minify: false, sourcemap: false, reportCompressedSize: false },
  });
}
