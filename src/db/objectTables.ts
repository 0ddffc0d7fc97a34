import type { ObjectKind } from '../../migrations/schema.ts';

/** The table holding each kind of object. */
export const OBJECT_TABLE = { lease: 'leases', resource: 'resources', blueprint: 'blueprints' } as const;

export interface ObjectRef {
  readonly kind: ObjectKind;
  readonly id: number;
}

/** The order key of an object's wake-up: the same text as the SQL function object_drain_job_key, in whose order wake-ups are written. */
export function drainJobKey(ref: ObjectRef): string {
  return `drain:${ref.kind}:${ref.id}`;
}

export function describeObject(ref: ObjectRef): string {
  return `${ref.kind} ${ref.id}`;
}
