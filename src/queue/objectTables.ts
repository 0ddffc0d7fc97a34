import type { ObjectKind } from '../../migrations/schema.ts';

/** The table holding each kind of object. */
export const OBJECT_TABLE = { lease: 'leases', resource: 'resources', blueprint: 'blueprints' } as const;

/** The graphile-worker task that drains each kind of object. */
export const DRAIN_TASK = { lease: 'drain_lease', resource: 'drain_resource', blueprint: 'drain_blueprint' } as const;

export interface ObjectRef {
  readonly kind: ObjectKind;
  readonly id: number;
}

/** An object's wake-up job key: the same text as the SQL function object_drain_job_key, which writes it. */
export function drainJobKey(ref: ObjectRef): string {
  return `drain:${ref.kind}:${ref.id}`;
}

export function describeObject(ref: ObjectRef): string {
  return `${ref.kind} ${ref.id}`;
}
