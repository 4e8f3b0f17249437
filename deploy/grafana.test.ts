/**
 * deploy/grafana/arclight.json and the PromQL in docs/operations.md query metrics that exist:
 * the runtime's, read from a live RuntimeMetrics registry (runtime/metrics.ts, with the process
 * metrics it adds), and the coordinator's, from a live CoordinatorMetrics registry
 * (coordinator/metrics.ts) on a migrated temporary SQLite database (its gauges query it when
 * collected), with label matchers the metric has; or, by name, the few from the exporters the
 * dashboard says it uses (kube-state-metrics, dcgm-exporter) and Prometheus' own `up`. Every
 * metric the runtime and the coordinator export is on a panel.
 */

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorMetrics, isProcessMetric } from '../coordinator/metrics.ts';
import { openStorage } from '../coordinator/storage/database.ts';
import { RuntimeMetrics } from '../runtime/metrics.ts';
import { isObject, type Json, type JsonObject } from './kustomize-render.ts';
import { labelMatchers, metricNames, variableQueryMetrics } from './promql.ts';

const root = join(import.meta.dirname, '..');

/** Metrics from other exporters that the dashboard and the guide may query, and which exporter. */
const EXTERNAL_METRICS: Readonly<Record<string, string>> = {
  kube_deployment_status_replicas_available: 'kube-state-metrics',
  kube_deployment_spec_replicas: 'kube-state-metrics',
  kube_pod_container_status_restarts_total: 'kube-state-metrics',
  DCGM_FI_DEV_GPU_UTIL: 'dcgm-exporter',
  DCGM_FI_DEV_ENC_UTIL: 'dcgm-exporter',
  up: 'Prometheus (one series per scrape target)',
};
/** Labels Prometheus' Kubernetes discovery (pod annotations or the ServiceMonitors) adds to every runtime and coordinator series. */
const TARGET_LABELS = ['namespace', 'pod', 'job', 'instance', 'service', 'container', 'arclight_dev_model'];

interface ExportedSeries {
  readonly metric: string;
  readonly labels: ReadonlySet<string>;
}

/** Every series name a registry exports (histogram buckets/sums/counts included), with its labels. */
async function seriesOf(registry: Registry): Promise<Map<string, ExportedSeries>> {
  const found = new Map<string, ExportedSeries>();
  for (const metric of await registry.getMetricsAsJSON()) {
    const declared = (registry.getSingleMetric(metric.name) as unknown as { labelNames?: readonly string[] } | undefined)?.labelNames ?? [];
    const labels = new Set([...declared, ...TARGET_LABELS]);
    found.set(metric.name, { metric: metric.name, labels });
    // prom-client's typings declare a numeric enum; the value is the type's name.
    if (String(metric.type) === 'histogram') {
      found.set(`${metric.name}_bucket`, { metric: metric.name, labels: new Set([...labels, 'le']) });
      found.set(`${metric.name}_sum`, { metric: metric.name, labels });
      found.set(`${metric.name}_count`, { metric: metric.name, labels });
    }
  }
  return found;
}

/** The coordinator's series: collecting its gauges queries the database, so it needs a real one. */
async function coordinatorSeries(): Promise<Map<string, ExportedSeries>> {
  const dir = mkdtempSync(join(tmpdir(), 'arclight-grafana-'));
  const storage = await openStorage(join(dir, 'coordinator.db'));
  try {
    return await seriesOf(new CoordinatorMetrics(storage.db).registry);
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The metric names (not series) a registry-backed map holds. */
const metricsIn = (exported: Map<string, ExportedSeries>): Set<string> => new Set([...exported.values()].map((s) => s.metric));

let runtime: Map<string, ExportedSeries>;
let coordinator: Map<string, ExportedSeries>;
/** Both, by series name (their names do not overlap: the coordinator's start arclight_coordinator_). */
let series: Map<string, ExportedSeries>;
beforeAll(async () => {
  runtime = await seriesOf(new RuntimeMetrics().registry);
  coordinator = await coordinatorSeries();
  expect([...metricsIn(runtime)].filter((name) => metricsIn(coordinator).has(name))).toEqual([]);
  series = new Map([...runtime, ...coordinator]);
});

function panelsOf(dashboard: JsonObject): JsonObject[] {
  const panels = dashboard['panels'];
  if (!Array.isArray(panels)) return [];
  return panels.filter(isObject).flatMap((panel) => [panel, ...panelsOf(panel)]);
}
function exprsOf(panel: JsonObject): string[] {
  const targets = panel['targets'];
  return Array.isArray(targets) ? targets.filter(isObject).map((target) => String(target['expr'] ?? '')) : [];
}

const dashboard = JSON.parse(readFileSync(join(root, 'deploy/grafana/arclight.json'), 'utf8')) as Json;

describe('promql helpers', () => {
  it('find metric names, not functions, keywords, labels, numbers or Grafana variables', () => {
    expect(
      metricNames(
        'histogram_quantile(0.95, sum by (le, codec) (rate(arclight_encode_duration_seconds_bucket{pod=~"$pod"}[$__rate_interval])))',
      ),
    ).toEqual(['arclight_encode_duration_seconds_bucket']);
    expect(
      metricNames('sum(rate(a_total{reason=~"x|y"}[5m])) / clamp_min(sum(rate(b_total[5m] offset 1h)), 1e-9) > 0.05 and on (pod) c'),
    ).toEqual(['a_total', 'b_total', 'c']);
    expect(labelMatchers('max by (track) (m{pod=~"$pod", quantile="0.95"}) + n{a!="b"}')).toEqual([
      { metric: 'm', labels: ['pod', 'quantile'] },
      { metric: 'n', labels: ['a'] },
    ]);
    expect(variableQueryMetrics('label_values(arclight_sessions{namespace=~"$namespace", job="x"}, pod)')).toEqual(['arclight_sessions']);
  });
});

describe('deploy/grafana/arclight.json', () => {
  it('is a dashboard with unique panel ids, every query on the ${datasource} variable', () => {
    expect(isObject(dashboard)).toBe(true);
    const board = dashboard as JsonObject;
    expect(board['uid']).toBe('arclight');
    expect(typeof board['schemaVersion']).toBe('number');
    const panels = panelsOf(board);
    const ids = panels.map((p) => p['id']);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of panels.filter((p) => p['type'] !== 'row')) {
      expect(exprsOf(panel).length, String(panel['title'])).toBeGreaterThan(0);
      expect(panel['datasource']).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(typeof panel['description']).toBe('string');
      const grid = panel['gridPos'];
      expect(isObject(grid) && Number(grid['x']) + Number(grid['w']) <= 24).toBe(true);
    }
  });

  it('queries only metrics the runtime or the coordinator exports (with labels they have) or the named exporters provide', () => {
    const board = dashboard as JsonObject;
    const variables = at(board, 'templating', 'list');
    const queries = [
      ...panelsOf(board).flatMap(exprsOf),
      ...(Array.isArray(variables)
        ? variables
            .filter(isObject)
            .map((v) => (isObject(v['query']) ? String(v['query']['query']) : ''))
            .filter((q) => q !== '')
        : []),
    ];
    expect(queries.length).toBeGreaterThan(20);
    for (const query of queries) {
      const names = query.startsWith('label_values(') ? variableQueryMetrics(query) : metricNames(query);
      expect(names.length, query).toBeGreaterThan(0);
      for (const name of names) expect(series.has(name) || name in EXTERNAL_METRICS, `${name} in ${query}`).toBe(true);
      for (const { metric, labels } of labelMatchers(query)) {
        const exported = series.get(metric);
        if (exported) for (const label of labels) expect(exported.labels.has(label), `${metric} has no label ${label}`).toBe(true);
      }
    }
  });

  const shown = (): Set<string | undefined> =>
    new Set(
      panelsOf(dashboard as JsonObject)
        .flatMap(exprsOf)
        .flatMap(metricNames)
        .map((name) => series.get(name)?.metric),
    );

  it('shows every metric runtime/metrics.ts declares', () => {
    const declared = [...readFileSync(join(root, 'runtime/metrics.ts'), 'utf8').matchAll(/name: '(arclight_\w+)'/g)].map((m) => m[1]);
    expect(declared.length).toBeGreaterThan(10);
    expect(declared.filter((name) => !shown().has(name))).toEqual([]);
  });

  it('shows every metric the coordinator exports (its live registry, which is what coordinator/metrics.ts declares)', () => {
    // Node's process metrics (prom-client's defaults) are not declared there; a few are on a panel.
    const exported = new Set([...metricsIn(coordinator)].filter((name) => !isProcessMetric(name)));
    const declared = [...readFileSync(join(root, 'coordinator/metrics.ts'), 'utf8').matchAll(/name: '(arclight_\w+)'/g)].map((m) => m[1]!);
    expect(exported.size).toBeGreaterThanOrEqual(7);
    expect([...exported].sort()).toEqual(declared.sort());
    expect([...exported].filter((name) => !shown().has(name))).toEqual([]);
  });
});

describe('docs/operations.md PromQL', () => {
  it('queries only metrics that exist, with labels they have', () => {
    const guide = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    const blocks = [...guide.matchAll(/```promql\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(0);
    const queries = blocks.flatMap((block) => block.split('\n')).filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
    expect(queries.length).toBeGreaterThan(5);
    for (const query of queries) {
      const names = metricNames(query);
      expect(names.length, query).toBeGreaterThan(0);
      for (const name of names) expect(series.has(name) || name in EXTERNAL_METRICS, `${name} in ${query}`).toBe(true);
      for (const { metric, labels } of labelMatchers(query)) {
        const exported = series.get(metric);
        if (exported) for (const label of labels) expect(exported.labels.has(label), `${metric} has no label ${label}`).toBe(true);
      }
    }
  });
});

function at(value: Json | undefined, ...path: string[]): Json | undefined {
  let current = value;
  for (const key of path) current = isObject(current) ? current[key] : undefined;
  return current;
}
