/** The kustomize stand-in that deploy/k8s.test.ts renders the overlays with. */

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { renderKustomization, strategicMerge, type Json } from './kustomize-render.ts';

describe('strategicMerge', () => {
  it('merges maps, replaces scalars, and deletes a field patched to null', () => {
    expect(strategicMerge({ a: 1, b: { c: 2, d: 3 }, e: 'x' }, { a: 5, b: { d: null, f: 4 }, e: null })).toEqual({
      a: 5,
      b: { c: 2, f: 4 },
    });
  });

  it('merges containers and env by name, volumeMounts by mountPath, appending new items', () => {
    const base: Json = {
      containers: [
        {
          name: 'app',
          image: 'a',
          env: [
            { name: 'A', value: '1' },
            { name: 'B', value: '2' },
          ],
          volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
        },
        { name: 'sidecar', image: 's' },
      ],
    };
    const patch = {
      containers: [
        {
          name: 'app',
          env: [
            { name: 'B', value: '3' },
            { name: 'C', value: '4' },
          ],
          volumeMounts: [{ mountPath: '/tmp', readOnly: true }],
        },
      ],
    };
    expect(strategicMerge(base, patch)).toEqual({
      containers: [
        {
          name: 'app',
          image: 'a',
          env: [
            { name: 'A', value: '1' },
            { name: 'B', value: '3' },
            { name: 'C', value: '4' },
          ],
          volumeMounts: [{ name: 'tmp', mountPath: '/tmp', readOnly: true }],
        },
        { name: 'sidecar', image: 's' },
      ],
    });
  });

  it('replaces the lists Kubernetes replaces, and deletes them with null', () => {
    expect(strategicMerge({ tolerations: [{ key: 'a' }], args: ['x'] }, { tolerations: [{ key: 'b' }], args: null })).toEqual({
      tolerations: [{ key: 'b' }],
    });
  });

  it('refuses lists and directives it does not model, rather than guess', () => {
    expect(() => strategicMerge({ ports: [{ containerPort: 1 }] }, { ports: [{ containerPort: 2 }] })).toThrow(/merges the list "ports"/);
    expect(() => strategicMerge({ a: 1 }, { $patch: 'replace' })).toThrow(/directive \$patch/);
    expect(() => strategicMerge({ env: [] }, { env: [{ value: 'no name' }] })).toThrow(/needs its name/);
  });
});

describe('renderKustomization', () => {
  let dir: string;
  const write = (path: string, text: string): void => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  const kustomization = (body: string): string => `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n${body}`;
  const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: example/web:1.0
        - name: helper
          image: registry.example.com:5000/helper
---
apiVersion: v1
kind: Namespace
metadata:
  name: team
`;

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('renders a base through an overlay: patches, then namespace (not on cluster-scoped kinds), then images', () => {
    dir = mkdtempSync(join(tmpdir(), 'arclight-kustomize-'));
    write('base/kustomization.yaml', kustomization('resources:\n  - web.yaml\n'));
    write('base/web.yaml', deployment);
    write(
      'overlay/kustomization.yaml',
      kustomization(`namespace: team
resources:
  - ../base
  - extra.yaml
images:
  - name: example/web
    newName: registry.example.com/web
    newTag: "2.0"
  - name: registry.example.com:5000/helper
    digest: sha256:abc123
patches:
  - path: patch.yaml
`),
    );
    write('overlay/extra.yaml', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: "1"\n');
    write('overlay/patch.yaml', 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n');
    const objects = renderKustomization(join(dir, 'overlay'));
    expect(objects.map((o) => [o.kind, o.metadata.name, o.metadata['namespace']])).toEqual([
      ['Deployment', 'web', 'team'],
      ['Namespace', 'team', undefined],
      ['ConfigMap', 'settings', 'team'],
    ]);
    expect(objects[0]).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: 'team' },
      spec: {
        replicas: 3,
        template: {
          spec: {
            containers: [
              { name: 'web', image: 'registry.example.com/web:2.0' },
              { name: 'helper', image: 'registry.example.com:5000/helper@sha256:abc123' },
            ],
          },
        },
      },
    });
  });

  it('fails on what kustomize would refuse or this renderer does not know', () => {
    dir = mkdtempSync(join(tmpdir(), 'arclight-kustomize-'));
    write('web.yaml', deployment);
    const attempt =
      (body: string): (() => void) =>
      () => {
        write('kustomization.yaml', kustomization(body));
        renderKustomization(dir);
      };
    expect(attempt('resources:\n  - web.yaml\n  - web.yaml\n')).toThrow(/defined twice/);
    expect(attempt('resources:\n  - missing.yaml\n')).toThrow(/does not exist/);
    expect(attempt('commonLabels:\n  a: b\n')).toThrow(/"commonLabels" is not supported/);
    write('patch.yaml', 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: other\n');
    expect(attempt('resources:\n  - web.yaml\npatches:\n  - path: patch.yaml\n')).toThrow(/no Deployment other to patch/);
    expect(attempt('resources:\n  - web.yaml\npatches:\n  - path: patch.yaml\n    target:\n      kind: Deployment\n')).toThrow(
      /each patch must be/,
    );
    expect(attempt('resources:\n  - web.yaml\nimages:\n  - name: example/web\n    newTag: 1.5\n')).toThrow(/must be a string/);
  });
});
