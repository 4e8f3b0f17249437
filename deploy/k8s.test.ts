/**
 * deploy/k8s: every object each overlay renders (deploy/kustomize-render.ts stands in for
 * `kustomize build`) is valid against the Kubernetes JSON Schemas with no unknown fields
 * (deploy/k8s-schema.ts), and the objects fit together: selectors select, named ports exist,
 * Secrets and ConfigMaps are there (or documented as the operator's), and the runtime and
 * coordinator are set up as docs/operations.md says — GPU, probes, drain, scraping, public URL.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateObject } from './k8s-schema.ts';
import { isObject, renderKustomization, type Json, type JsonObject, type K8sObject } from './kustomize-render.ts';

const root = join(import.meta.dirname, '..');
const k8s = join(root, 'deploy/k8s');

/** The value at `path` below `value`, or undefined. */
function at(value: Json | undefined, ...path: (string | number)[]): Json | undefined {
  let current = value;
  for (const key of path) {
    if (typeof key === 'number') current = Array.isArray(current) ? current[key] : undefined;
    else current = isObject(current) ? current[key] : undefined;
  }
  return current;
}
const objectsAt = (value: Json | undefined, ...path: (string | number)[]): JsonObject[] => {
  const list = at(value, ...path);
  return Array.isArray(list) ? list.filter(isObject) : [];
};
const stringMap = (value: Json | undefined): Record<string, string> => {
  const result: Record<string, string> = {};
  if (isObject(value)) for (const [key, item] of Object.entries(value)) if (typeof item === 'string') result[key] = item;
  return result;
};
const matches = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([key, value]) => labels[key] === value);

const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);
const workloads = (objects: K8sObject[]): K8sObject[] => objects.filter((o) => WORKLOADS.has(o.kind));
const podLabels = (workload: K8sObject): Record<string, string> => stringMap(at(workload, 'spec', 'template', 'metadata', 'labels'));
const containers = (workload: K8sObject): JsonObject[] => objectsAt(workload, 'spec', 'template', 'spec', 'containers');
const find = (objects: K8sObject[], kind: string, name: string): K8sObject => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
const envValue = (container: JsonObject, name: string): Json | undefined =>
  objectsAt(container, 'env').find((e) => e['name'] === name)?.['value'];

/** Secrets the production overlay expects the operator to create (docs/operations.md, "Secrets"). */
const EXTERNAL_SECRETS: Readonly<Record<string, readonly string[]>> = {
  'arclight-database': ['url'],
  'arclight-runtime-secret': ['secret'],
  'arclight-signing-key': ['secret'],
};

const overlays = {
  base: renderKustomization(join(k8s, 'base')),
  dev: renderKustomization(join(k8s, 'overlays/dev')),
  production: renderKustomization(join(k8s, 'overlays/production')),
};

describe.each(Object.entries(overlays))('deploy/k8s %s', (name, objects) => {
  it('renders the objects it should', () => {
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    const common = [
      'ConfigMap/arclight-coordinator',
      'Deployment/arclight-coordinator',
      'Deployment/arclight-runtime-pattern',
      'PodDisruptionBudget/arclight-coordinator',
      'PodDisruptionBudget/arclight-runtime-pattern',
      'Service/arclight-coordinator',
      'Service/arclight-runtime-pattern',
    ];
    const extra: Record<string, string[]> = {
      base: [],
      dev: [
        'Namespace/arclight-dev',
        'Secret/arclight-database',
        'Secret/arclight-postgres',
        'Secret/arclight-runtime-secret',
        'Secret/arclight-signing-key',
        'Service/arclight-postgres',
        'StatefulSet/arclight-postgres',
      ],
      production: ['Namespace/arclight', 'ServiceMonitor/arclight-coordinator', 'ServiceMonitor/arclight-runtime'],
    };
    expect(kinds).toEqual([...common, ...extra[name]!].sort());
  });

  it.each(objects.map((o) => [`${o.kind} ${o.metadata.name}`, o] as const))(
    '%s is valid against its JSON Schema, with no unknown fields',
    (_, object) => {
      expect(validateObject(object)).toEqual({ errors: [], unknownFields: [] });
    },
  );

  it('puts every namespaced object in the overlay namespace', () => {
    const namespace = { base: undefined, dev: 'arclight-dev', production: 'arclight' }[name];
    for (const object of objects)
      expect(object.metadata['namespace'], object.metadata.name).toBe(object.kind === 'Namespace' ? undefined : namespace);
  });

  it('has workloads whose selectors match their pod labels, running non-root without privilege escalation', () => {
    for (const workload of workloads(objects)) {
      expect(matches(stringMap(at(workload, 'spec', 'selector', 'matchLabels')), podLabels(workload)), workload.metadata.name).toBe(true);
      expect(at(workload, 'spec', 'template', 'spec', 'securityContext', 'runAsNonRoot')).toBe(true);
      for (const container of containers(workload)) {
        expect(at(container, 'securityContext', 'allowPrivilegeEscalation')).toBe(false);
        expect(at(container, 'securityContext', 'capabilities', 'drop')).toEqual(['ALL']);
        expect(at(container, 'resources', 'requests', 'memory'), `${workload.metadata.name} memory request`).toBeDefined();
        expect(at(container, 'resources', 'limits', 'memory'), `${workload.metadata.name} memory limit`).toBeDefined();
        // Probes and Services name ports the container declares.
        const ports = new Set(objectsAt(container, 'ports').map((p) => p['name']));
        for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
          const port = at(container, probe, 'httpGet', 'port') ?? at(container, probe, 'tcpSocket', 'port');
          if (typeof port === 'string') expect(ports.has(port), `${workload.metadata.name} ${probe} port ${port}`).toBe(true);
        }
      }
    }
  });

  it('has Services and PodDisruptionBudgets that select a workload, on ports its pods declare', () => {
    for (const service of objects.filter((o) => o.kind === 'Service')) {
      const selected = workloads(objects).filter((w) => matches(stringMap(at(service, 'spec', 'selector')), podLabels(w)));
      expect(
        selected.map((w) => w.metadata.name),
        `Service ${service.metadata.name}`,
      ).toHaveLength(1);
      const declared = new Set(containers(selected[0]!).flatMap((c) => objectsAt(c, 'ports').map((p) => p['name'])));
      for (const port of objectsAt(service, 'spec', 'ports'))
        expect(declared.has(port['targetPort'] ?? null), `${service.metadata.name} → ${String(port['targetPort'])}`).toBe(true);
    }
    for (const workload of objects.filter((o) => o.kind === 'Deployment')) {
      const budgets = objects.filter(
        (o) => o.kind === 'PodDisruptionBudget' && matches(stringMap(at(o, 'spec', 'selector', 'matchLabels')), podLabels(workload)),
      );
      expect(
        budgets.map((b) => b.metadata.name),
        `PodDisruptionBudget for ${workload.metadata.name}`,
      ).toEqual([workload.metadata.name]);
    }
  });

  it('refers only to Secrets it creates or the operator is told to create, with their keys', () => {
    const created = new Map(
      objects.filter((o) => o.kind === 'Secret').map((s) => [s.metadata.name, Object.keys(stringMap(at(s, 'stringData')))]),
    );
    for (const workload of workloads(objects)) {
      for (const container of containers(workload)) {
        for (const env of objectsAt(container, 'env')) {
          const ref = at(env, 'valueFrom', 'secretKeyRef');
          if (!isObject(ref)) continue;
          const secret = String(ref['name']);
          const keys = created.get(secret) ?? (name === 'dev' ? undefined : EXTERNAL_SECRETS[secret]);
          expect(keys, `${workload.metadata.name}: Secret ${secret}`).toBeDefined();
          expect(keys).toContain(ref['key']);
        }
        for (const from of objectsAt(container, 'envFrom')) {
          const secret = at(from, 'secretRef', 'name');
          if (typeof secret === 'string') expect(created.has(secret), `${workload.metadata.name}: Secret ${secret}`).toBe(true);
        }
      }
      // Secrets mounted as files: named, with the keys they project.
      for (const volume of objectsAt(workload, 'spec', 'template', 'spec', 'volumes')) {
        const secret = at(volume, 'secret', 'secretName');
        if (typeof secret !== 'string') continue;
        const keys = created.get(secret) ?? (name === 'dev' ? undefined : EXTERNAL_SECRETS[secret]);
        expect(keys, `${workload.metadata.name}: Secret ${secret}`).toBeDefined();
        for (const item of objectsAt(volume, 'secret', 'items')) expect(keys).toContain(item['key']);
      }
    }
  });

  it('gives the coordinator its signing-key secret as a file from the arclight-signing-key Secret, readable by its user only through the pod group', () => {
    const coordinator = find(objects, 'Deployment', 'arclight-coordinator');
    const [container] = containers(coordinator);
    const file = envValue(container!, 'ARCLIGHT_SIGNING_KEY_SECRET_FILE');
    expect(file).toBe('/etc/arclight/signing-key/secret');
    const mount = objectsAt(container, 'volumeMounts').find(
      (m) => typeof m['mountPath'] === 'string' && String(file).startsWith(`${m['mountPath']}/`),
    );
    expect(mount).toMatchObject({ readOnly: true });
    const volume = objectsAt(coordinator, 'spec', 'template', 'spec', 'volumes').find((v) => v['name'] === mount!['name']);
    expect(at(volume, 'secret', 'secretName')).toBe('arclight-signing-key');
    expect(objectsAt(volume, 'secret', 'items')).toEqual([
      { key: 'secret', path: String(file).slice(String(mount!['mountPath']).length + 1) },
    ]);
    // 0440 and the pod's fsGroup: the coordinator (uid 10001) reads it, nobody else in the pod.
    expect(at(volume, 'secret', 'defaultMode')).toBe(0o440);
    const pod = at(coordinator, 'spec', 'template', 'spec', 'securityContext');
    expect(at(pod, 'fsGroup')).toBe(at(pod, 'runAsGroup'));
    // The secret itself is never a plain value in the manifests (the dev overlay's Secret aside).
    expect(objectsAt(container, 'env').map((e) => e['name'])).not.toContain('ARCLIGHT_SIGNING_KEY_SECRET');
    if (name === 'dev')
      expect(stringMap(at(find(objects, 'Secret', 'arclight-signing-key'), 'stringData'))['secret']!.length).toBeGreaterThanOrEqual(16);
  });

  it('refers only to ConfigMaps it renders, with their keys', () => {
    for (const workload of workloads(objects)) {
      for (const container of containers(workload)) {
        for (const env of objectsAt(container, 'env')) {
          const ref = at(env, 'valueFrom', 'configMapKeyRef');
          if (!isObject(ref)) continue;
          const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === ref['name']);
          expect(configMap, `${workload.metadata.name}: ConfigMap ${String(ref['name'])}`).toBeDefined();
          expect(Object.keys(stringMap(at(configMap, 'data')))).toContain(ref['key']);
        }
      }
    }
  });

  it('runs a coordinator of at least two replicas, ready when GET /health answers, on the database and runtime secrets', () => {
    const coordinator = find(objects, 'Deployment', 'arclight-coordinator');
    expect(at(coordinator, 'spec', 'replicas')).toBeGreaterThanOrEqual(2);
    const [container] = containers(coordinator);
    expect(at(container, 'readinessProbe', 'httpGet', 'path')).toBe('/health');
    // Liveness never asks the database: an outage must not restart every replica.
    expect(at(container, 'livenessProbe', 'tcpSocket', 'port')).toBe('http');
    expect(at(container, 'livenessProbe', 'httpGet')).toBeUndefined();
    expect(objectsAt(container, 'env').map((e) => e['name'])).toEqual(expect.arrayContaining(['DATABASE_URL', 'ARCLIGHT_RUNTIME_SECRET']));
    expect(at(container, 'image')).toMatch(/(^|\/)(arclight-)?coordinator(:|$)/);
    // Prometheus scrape annotations point at the HTTP port's /metrics.
    const annotations = stringMap(at(coordinator, 'spec', 'template', 'metadata', 'annotations'));
    expect(annotations).toEqual({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '8090', 'prometheus.io/path': '/metrics' });
    expect(objectsAt(container, 'ports').find((p) => p['name'] === 'http')?.['containerPort']).toBe(8090);
    expect(envValue(container!, 'ARCLIGHT_PORT')).toBe('8090');
  });

  it('gives the coordinator its public URL from the arclight-coordinator ConfigMap: an origin the entrypoint accepts', () => {
    const [container] = containers(find(objects, 'Deployment', 'arclight-coordinator'));
    const ref = at(
      objectsAt(container, 'env').find((e) => e['name'] === 'ARCLIGHT_PUBLIC_URL'),
      'valueFrom',
      'configMapKeyRef',
    );
    expect(ref).toEqual({ name: 'arclight-coordinator', key: 'public-url' });
    const url = stringMap(at(find(objects, 'ConfigMap', 'arclight-coordinator'), 'data'))['public-url']!;
    expect(url).toMatch(/^https?:\/\/[^/?#\s]+$/);
    if (name === 'dev') expect(url).toBe('http://localhost:8090'); // kubectl port-forward
    if (name === 'production') expect(url).toMatch(/^https:\/\//); // TLS at the load balancer
  });

  it('runs the pattern runtime on a GPU (none in dev), ready on /health, draining before it stops', () => {
    const runtime = find(objects, 'Deployment', 'arclight-runtime-pattern');
    const [container] = containers(runtime);
    const gpu = at(container, 'resources', 'limits', 'nvidia.com/gpu');
    if (name === 'dev') expect(gpu).toBeUndefined();
    else expect(gpu).toBe(1);
    expect(at(container, 'resources', 'requests', 'nvidia.com/gpu')).toBe(gpu);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe'])
      expect(at(container, probe, 'httpGet', 'path')).toBe('/health');
    expect(at(container, 'lifecycle', 'preStop', 'exec', 'command')).toEqual(['/usr/local/bin/arclight-drain']);
    // The grace period covers the drain, with time to close and report the session's end.
    const drainSeconds = Number(envValue(container!, 'ARCLIGHT_DRAIN_SECONDS'));
    const grace = at(runtime, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds');
    expect(drainSeconds).toBeGreaterThan(0);
    expect(typeof grace === 'number' && grace >= drainSeconds + 20).toBe(true);
    // Hosted mode, registered under the pod's name and reached at its IP.
    expect(envValue(container!, 'ARCLIGHT_COORDINATOR_URL')).toBe('http://arclight-coordinator:8090');
    expect(envValue(container!, 'ARCLIGHT_ADVERTISE_URL')).toBe('http://$(POD_IP):8080');
    expect(envValue(container!, 'ARCLIGHT_RUNTIME_ID')).toBe('$(POD_NAME)');
    const names = objectsAt(container, 'env').map((e) => e['name']);
    expect(names.indexOf('POD_IP')).toBeLessThan(names.indexOf('ARCLIGHT_ADVERTISE_URL')); // $(VAR) needs VAR defined before it
    expect(names.indexOf('POD_NAME')).toBeLessThan(names.indexOf('ARCLIGHT_RUNTIME_ID'));
    // Prometheus scrape annotations point at the HTTP port's /metrics.
    const annotations = stringMap(at(runtime, 'spec', 'template', 'metadata', 'annotations'));
    expect(annotations).toEqual({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '8080', 'prometheus.io/path': '/metrics' });
    expect(objectsAt(container, 'ports').find((p) => p['name'] === 'http')?.['containerPort']).toBe(8080);
    expect(envValue(container!, 'ARCLIGHT_PORT')).toBe('8080');
    expect(at(runtime, 'spec', 'template', 'spec', 'securityContext', 'runAsUser')).toBe(10001);
  });

  it('sets only environment variables the entrypoints or the CLIs read', () => {
    const read = (file: string): string => readFileSync(join(root, file), 'utf8');
    const sources: Record<string, string> = {
      'arclight-coordinator': read('deploy/coordinator/entrypoint.sh') + read('coordinator/coordinator.ts'),
      'arclight-runtime-pattern': read('deploy/runtime/entrypoint.sh') + read('runtime/cli.ts'),
    };
    for (const workload of objects.filter((o) => o.kind === 'Deployment')) {
      const source = sources[workload.metadata.name]!;
      for (const container of containers(workload)) {
        const env = objectsAt(container, 'env');
        const values = env.map((e) => String(e['value'] ?? '')).join(' ');
        for (const variable of env.map((e) => String(e['name']))) {
          // Helpers such as POD_IP are used by later values ($(POD_IP)).
          const used = source.includes(variable) || values.includes(`$(${variable})`);
          expect(used, `${workload.metadata.name}: nothing reads ${variable}`).toBe(true);
        }
      }
    }
  });
});

describe('validateObject', () => {
  const runtime = (): K8sObject => structuredClone(find(overlays.production, 'Deployment', 'arclight-runtime-pattern'));

  it('reports a misspelt field, which the published schemas alone would accept', () => {
    const object = runtime();
    const container = containers(object)[0]!;
    container['readinesProbe'] = container['readinessProbe']!;
    delete container['readinessProbe'];
    expect(validateObject(object)).toEqual({ errors: [], unknownFields: ['/spec/template/spec/containers/0/readinesProbe'] });
  });

  it('reports a value of the wrong type, a missing required field, and a kind it has no schema for', () => {
    const object = runtime();
    objectsAt(containers(object)[0], 'ports')[0]!['containerPort'] = 'http';
    expect(validateObject(object).errors.join()).toContain('containerPort must be integer');
    const noSelector = runtime();
    delete (noSelector['spec'] as JsonObject)['selector'];
    expect(validateObject(noSelector).errors.join()).toContain('data/spec must have required property selector');
    expect(validateObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } }).errors).toEqual([
      'no schema for example.com/v1 Widget',
    ]);
  });
});

describe('deploy/k8s overlays', () => {
  it('dev: PostgreSQL in the cluster, and the database URL pointing at it with its credentials', () => {
    const objects = overlays.dev;
    const url = new URL(stringMap(at(find(objects, 'Secret', 'arclight-database'), 'stringData'))['url']!);
    const postgres = stringMap(at(find(objects, 'Secret', 'arclight-postgres'), 'stringData'));
    expect(url.protocol).toBe('postgres:');
    expect([url.username, url.password, url.pathname.slice(1)]).toEqual([
      postgres['POSTGRES_USER'],
      postgres['POSTGRES_PASSWORD'],
      postgres['POSTGRES_DB'],
    ]);
    const service = find(objects, 'Service', 'arclight-postgres');
    expect(url.hostname).toBe(service.metadata.name);
    expect(String(objectsAt(service, 'spec', 'ports')[0]?.['port'])).toBe(url.port);
    const statefulSet = find(objects, 'StatefulSet', 'arclight-postgres');
    expect(at(statefulSet, 'spec', 'serviceName')).toBe(service.metadata.name);
    expect(at(statefulSet, 'spec', 'volumeClaimTemplates', 0, 'metadata', 'name')).toBe('data');
    for (const deployment of objects.filter((o) => o.kind === 'Deployment')) {
      for (const container of containers(deployment)) expect(String(at(container, 'image'))).toMatch(/:dev$/);
    }
  });

  it('production: images from the registry, and ServiceMonitors scraping the runtime and coordinator Services', () => {
    const objects = overlays.production;
    for (const deployment of objects.filter((o) => o.kind === 'Deployment')) {
      for (const container of containers(deployment))
        expect(String(at(container, 'image'))).toMatch(/^registry\.example\.com\/arclight\/(coordinator|runtime):0\.1\.0$/);
    }
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false); // created by the operator
    for (const [monitorName, serviceName] of [
      ['arclight-runtime', 'arclight-runtime-pattern'],
      ['arclight-coordinator', 'arclight-coordinator'],
    ] as const) {
      const monitor = find(objects, 'ServiceMonitor', monitorName);
      const selector = stringMap(at(monitor, 'spec', 'selector', 'matchLabels'));
      const services = objects.filter((o) => o.kind === 'Service' && matches(selector, stringMap(o.metadata['labels'])));
      expect(services.map((s) => s.metadata.name)).toEqual([serviceName]);
      const endpoint = objectsAt(monitor, 'spec', 'endpoints')[0];
      expect(objectsAt(services[0], 'spec', 'ports').map((p) => p['name'])).toContain(endpoint?.['port']);
      expect(endpoint?.['path']).toBe('/metrics');
    }
  });

  it('production: the operator is told which Secrets to create', () => {
    const guide = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    const kustomization = readFileSync(join(k8s, 'overlays/production/kustomization.yaml'), 'utf8');
    for (const [secret, keys] of Object.entries(EXTERNAL_SECRETS)) {
      expect(guide).toContain(secret);
      expect(kustomization).toContain(secret);
      for (const key of keys) expect(guide).toContain(`${secret} --from-literal=${key}=`);
    }
  });
});
