/**
 * Validates rendered Kubernetes objects against the Kubernetes JSON Schemas, offline: the
 * kubernetes-models package ships them (Kubernetes 1.27) as precompiled ajv validators, one per
 * kind, and @kubernetes-models/prometheus-operator does the same for the ServiceMonitor CRD.
 *
 * The published schemas accept fields they do not define (the API server's strict field
 * validation, what `kubectl apply` uses, rejects them), so a misspelt `readinesProbe` would pass.
 * `validateObject` therefore also reports every field the schema's validator never looked at: a
 * compiled validator reads each property its schema defines, and iterates maps (labels,
 * resources), so a key it did not read is one the schema does not know. (A schema that allows
 * arbitrary content would make this report its keys; none of the kinds below has one on the
 * paths deploy/k8s uses.)
 */

import { Namespace, Secret, Service, ConfigMap, ServiceAccount, PersistentVolumeClaim } from 'kubernetes-models/v1';
import { Deployment, StatefulSet, DaemonSet } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ServiceMonitor, PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import type { Json, K8sObject } from './kustomize-render.ts';

interface SchemaModel {
  readonly prototype: { validate(): void };
}

/** Kinds deploy/k8s may hold, by `apiVersion/kind`. */
const MODELS: Readonly<Record<string, SchemaModel>> = {
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/ServiceAccount': ServiceAccount,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'apps/v1/DaemonSet': DaemonSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
};

export interface ValidationResult {
  /** The schema's errors (ajv's messages with their paths); empty when valid. */
  readonly errors: readonly string[];
  /** JSON pointers of fields the schema does not define. */
  readonly unknownFields: readonly string[];
}

/** Wraps a value so every property a validator reads is recorded (by JSON pointer). */
function tracked(value: Json, path: string, read: Set<string>, present: Set<string>): Json {
  if (value === null || typeof value !== 'object') return value;
  const isArray = Array.isArray(value);
  if (!isArray) for (const key of Object.keys(value)) present.add(`${path}/${key}`);
  return new Proxy(value, {
    get(target, property, receiver) {
      const result: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || !Object.hasOwn(target, property)) return result;
      if (!isArray) read.add(`${path}/${property}`);
      return tracked(result as Json, `${path}/${property}`, read, present);
    },
  });
}

export function validateObject(object: K8sObject): ValidationResult {
  const model = MODELS[`${object.apiVersion}/${object.kind}`];
  if (model === undefined) return { errors: [`no schema for ${object.apiVersion} ${object.kind}`], unknownFields: [] };
  const read = new Set<string>();
  const present = new Set<string>();
  const errors: string[] = [];
  try {
    model.prototype.validate.call(tracked(object, '', read, present));
  } catch (error) {
    errors.push((error as Error).message);
  }
  return { errors, unknownFields: [...present].filter((path) => !read.has(path)) };
}
