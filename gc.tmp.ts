import { PerformanceObserver } from 'node:perf_hooks';
import { ArclightClient } from './client/node.ts';
import { startRuntime } from './runtime/index.ts';
import { createLogger } from './runtime/log.ts';
import pattern from './models/examples/pattern/index.ts';
let gcCount = 0, gcMs = 0;
new PerformanceObserver((list) => { for (const e of list.getEntries()) { gcCount++; gcMs += e.duration; } }).observe({ entryTypes: ['gc'] });
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
async function measure(label: string) {
  const a = cpu(); const t = Date.now(); gcCount = 0; gcMs = 0;
  await new Promise((r) => setTimeout(r, 5000));
  const m = process.memoryUsage();
  console.log(label, `cpu ${((cpu() - a) / (Date.now() - t) * 100).toFixed(1)}%`, `gc ${gcCount} (${gcMs.toFixed(0)} ms)`, `heap ${(m.heapUsed / 2 ** 20).toFixed(0)}M ext ${(m.external / 2 ** 20).toFixed(0)}M ab ${(m.arrayBuffers / 2 ** 20).toFixed(0)}M rss ${(m.rss / 2 ** 20).toFixed(0)}M`);
}
const mode = process.argv[2] ?? 'sessions';
let runtime = await startRuntime({ model: pattern as never, port: 0, host: '127.0.0.1', ice: { hostAddresses: ['127.0.0.1'] }, playground: false, logger: createLogger({}, 'warn') });
for (let i = 0; i < 4; i++) {
  if (mode === 'runtimes' && i > 0) runtime = await startRuntime({ model: pattern as never, port: 0, host: '127.0.0.1', ice: { hostAddresses: ['127.0.0.1'] }, playground: false, logger: createLogger({}, 'warn') });
  const client = new ArclightClient({ modelName: 'pattern', local: true, localRuntimeUrl: runtime.url });
  await client.connect();
  client.pauseTrack('tone');
  await new Promise((r) => setTimeout(r, 1000));
  await measure(`${mode} ${i} streaming`);
  await client.disconnect();
  if (mode === 'runtimes') await runtime.close();
  await new Promise((r) => setTimeout(r, 1000));
}
process.exit(0);
