// Starts the stylise inference worker (inference-worker.ts). A worker thread does not inherit the
// TypeScript loader of the thread that made it (tsx, registered at run time by `arclight serve`,
// or vitest's transform), so this plain-JavaScript entry registers tsx in the worker first.
import { register } from 'tsx/esm/api';

register();
await import('./inference-worker.ts');
