/**
 * Renders a kustomization the way `kustomize build` does, for the subset deploy/k8s/ uses, so
 * `npm test` can validate every object an overlay produces without the kustomize binary.
 *
 * Supported (anything else in a kustomization or a patch throws, so the manifests cannot start
 * relying on a feature this renderer would silently get wrong):
 *  - `resources`: YAML files (several documents each) and directories holding a kustomization;
 *  - `patches`: `- path: file.yaml`, a strategic merge patch naming its target by apiVersion,
 *    kind and metadata.name: maps merge, `null` deletes a field, the lists Kubernetes merges by
 *    key (containers and env by name, …) merge by that key, the listed replace-lists replace;
 *  - `namespace`: set on every namespaced object;
 *  - `images`: `name` → `newName` / `newTag` / `digest` in pod templates' containers.
 * Order as kustomize: the resources (each base rendered with its own kustomization), then
 * patches, then namespace, then images.
 */

import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A rendered object: apiVersion, kind and metadata.name are checked present. */
export interface K8sObject extends JsonObject {
  apiVersion: string;
  kind: string;
  metadata: JsonObject & { name: string };
}

const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'namespace', 'resources', 'images', 'patches']);
const IMAGE_KEYS = new Set(['name', 'newName', 'newTag', 'digest']);
/** Lists Kubernetes' strategic merge patch merges by a key (their patchMergeKey in the API). */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: 'name',
  initContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  imagePullSecrets: 'name',
};
/** Lists a strategic merge patch replaces whole (no patchMergeKey). */
const REPLACE_LISTS = new Set(['command', 'args', 'tolerations', 'accessModes', 'drop', 'add', 'podTargetLabels']);
/** Kinds that live outside namespaces (the ones deploy/k8s could plausibly hold). */
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'PersistentVolume',
  'StorageClass',
  'PriorityClass',
]);

/** Parses a YAML file's documents as JSON values (empty documents skipped). */
export function readYamlDocuments(file: string): Json[] {
  const documents = parseAllDocuments(readFileSync(file, 'utf8'));
  const values: Json[] = [];
  for (const document of documents) {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((e) => e.message).join('; ')}`);
    const value = document.toJS() as Json | undefined;
    if (value !== null && value !== undefined) values.push(value);
  }
  return values;
}

export function asK8sObject(value: Json, where: string): K8sObject {
  if (!isObject(value)) throw new Error(`${where}: a document is not a mapping`);
  const { apiVersion, kind, metadata } = value;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string' || !isObject(metadata) || typeof metadata['name'] !== 'string') {
    throw new Error(`${where}: a document lacks apiVersion, kind or metadata.name`);
  }
  return value as K8sObject;
}

export function objectId(object: K8sObject): string {
  const namespace = object.metadata['namespace'];
  return `${object.apiVersion}/${object.kind}/${typeof namespace === 'string' ? namespace : '~'}/${object.metadata.name}`;
}

function stringList(value: Json | undefined, what: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item): item is string => typeof item === 'string'))
    throw new Error(`${what} must be a list of strings`);
  return value;
}

/** Renders the kustomization in `directory` to its objects. */
export function renderKustomization(directory: string): K8sObject[] {
  const file = join(directory, 'kustomization.yaml');
  if (!existsSync(file)) throw new Error(`${directory}: no kustomization.yaml`);
  const [kustomization, ...more] = readYamlDocuments(file);
  if (!isObject(kustomization) || more.length > 0) throw new Error(`${file}: must be one mapping`);
  for (const key of Object.keys(kustomization)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${file}: "${key}" is not supported by this renderer`);
  }
  if (kustomization['apiVersion'] !== 'kustomize.config.k8s.io/v1beta1' || kustomization['kind'] !== 'Kustomization') {
    throw new Error(`${file}: apiVersion must be kustomize.config.k8s.io/v1beta1 and kind Kustomization`);
  }

  const objects: K8sObject[] = [];
  const seen = new Set<string>();
  const add = (object: K8sObject, where: string): void => {
    const id = objectId(object);
    if (seen.has(id)) throw new Error(`${where}: ${id} is defined twice`);
    seen.add(id);
    objects.push(object);
  };
  for (const entry of stringList(kustomization['resources'], `${file}: resources`)) {
    const path = join(directory, entry);
    if (!existsSync(path)) throw new Error(`${file}: resource ${entry} does not exist`);
    if (statSync(path).isDirectory()) {
      for (const object of renderKustomization(path)) add(object, `${file}: ${entry}`);
    } else {
      for (const document of readYamlDocuments(path)) add(asK8sObject(document, path), path);
    }
  }

  const patches = kustomization['patches'] ?? [];
  if (!Array.isArray(patches)) throw new Error(`${file}: patches must be a list`);
  for (const patchEntry of patches) {
    if (!isObject(patchEntry) || typeof patchEntry['path'] !== 'string' || Object.keys(patchEntry).length !== 1) {
      throw new Error(`${file}: each patch must be { path: file } (a strategic merge patch naming its target)`);
    }
    const patchFile = join(directory, patchEntry['path']);
    const [document, ...rest] = readYamlDocuments(patchFile);
    if (document === undefined || rest.length > 0) throw new Error(`${patchFile}: a patch file holds one document`);
    const patch = asK8sObject(document, patchFile);
    const index = objects.findIndex(
      (object) => object.apiVersion === patch.apiVersion && object.kind === patch.kind && object.metadata.name === patch.metadata.name,
    );
    if (index < 0) throw new Error(`${patchFile}: no ${patch.kind} ${patch.metadata.name} to patch`);
    objects[index] = asK8sObject(strategicMerge(objects[index]!, patch), patchFile);
  }

  const namespace = kustomization['namespace'];
  if (namespace !== undefined) {
    if (typeof namespace !== 'string') throw new Error(`${file}: namespace must be a string`);
    for (const object of objects) if (!CLUSTER_SCOPED.has(object.kind)) object.metadata['namespace'] = namespace;
  }

  const images = kustomization['images'] ?? [];
  if (!Array.isArray(images)) throw new Error(`${file}: images must be a list`);
  for (const image of images) {
    if (!isObject(image) || typeof image['name'] !== 'string') throw new Error(`${file}: each image needs a name`);
    for (const [key, value] of Object.entries(image)) {
      if (!IMAGE_KEYS.has(key)) throw new Error(`${file}: images.${key} is not supported by this renderer`);
      if (typeof value !== 'string') throw new Error(`${file}: images.${key} must be a string (quote a tag such as "1.0")`);
    }
    for (const object of objects) setImages(object, image);
  }
  return objects;
}

/** Kubernetes' strategic merge patch, for the fields listed at the top of this file. */
export function strategicMerge(base: Json | undefined, patch: Json, field = ''): Json {
  if (isObject(patch)) {
    const result: JsonObject = isObject(base) ? { ...base } : {};
    for (const [key, value] of Object.entries(patch)) {
      if (key.startsWith('$')) throw new Error(`strategic merge directive ${key} is not supported by this renderer`);
      if (value === null) delete result[key];
      else result[key] = strategicMerge(result[key], value, key);
    }
    return result;
  }
  if (Array.isArray(patch)) {
    const mergeKey = MERGE_KEYS[field];
    if (mergeKey !== undefined) {
      const result: Json[] = Array.isArray(base) ? [...base] : [];
      for (const item of patch) {
        if (!isObject(item) || item[mergeKey] === undefined) throw new Error(`every ${field} item in a patch needs its ${mergeKey}`);
        const at = result.findIndex((existing) => isObject(existing) && existing[mergeKey] === item[mergeKey]);
        if (at >= 0) result[at] = strategicMerge(result[at], item, '');
        else result.push(strategicMerge(undefined, item, ''));
      }
      return result;
    }
    if (!REPLACE_LISTS.has(field)) throw new Error(`this renderer does not know how a strategic merge patch merges the list "${field}"`);
    return patch;
  }
  return patch;
}

function setImages(object: K8sObject, image: JsonObject): void {
  const spec = object['spec'];
  const template = isObject(spec) ? spec['template'] : undefined;
  const podSpec = isObject(template) ? template['spec'] : undefined;
  if (!isObject(podSpec)) return;
  for (const list of ['containers', 'initContainers']) {
    const containers = podSpec[list];
    if (!Array.isArray(containers)) continue;
    for (const container of containers) {
      if (!isObject(container) || typeof container['image'] !== 'string') continue;
      const current = container['image'];
      const match = /^(.*?)(?:@(sha256:[0-9a-f]+))?$/.exec(current)!;
      const withoutDigest = match[1]!;
      const tagAt = withoutDigest.lastIndexOf(':');
      const hasTag = tagAt > withoutDigest.lastIndexOf('/');
      const name = hasTag ? withoutDigest.slice(0, tagAt) : withoutDigest;
      if (name !== image['name']) continue;
      const newName = typeof image['newName'] === 'string' ? image['newName'] : name;
      if (typeof image['digest'] === 'string') container['image'] = `${newName}@${image['digest']}`;
      else if (typeof image['newTag'] === 'string') container['image'] = `${newName}:${image['newTag']}`;
      else container['image'] = `${newName}${hasTag ? withoutDigest.slice(tagAt) : ''}${match[2] ? `@${match[2]}` : ''}`;
    }
  }
}
