import { z } from 'zod';
import type { Db } from '../db/Database.ts';
import { type Labels, LabelsSchema, parseSelector, type Selector } from '../domain/labels.ts';

/**
 * The contract between Slipway and the infrastructure a blueprint manages.
 *
 * Calls are AT LEAST ONCE: a worker that dies between a call and the commit
 * of its outcome leaves the command queued, and the next worker calls again
 * with the same idempotency key. A driver must therefore make each call
 * idempotent for its key: a repeated allocate must not create a second thing,
 * a repeated release must not fail because the lease is already clean.
 * State changes are EXACTLY ONCE: only the drain, holding the object's lock,
 * commits them, checked against the object's version.
 *
 * Failures: throw TransientDriverError for "try again later" (the command
 * yields and is retried with backoff; any other thrown error is treated the
 * same way), PermanentDriverError for "this will never work" (the object
 * becomes `broken` and is then destroyed).
 */
export interface Driver {
  allocateResource(call: ResourceCall): Promise<DriverResult>;
  activateResource(call: ResourceCall): Promise<DriverResult>;
  destroyResource(call: ResourceCall): Promise<DriverResult>;
  acquireLease(call: LeaseCall): Promise<DriverResult>;
  activateLease(call: LeaseCall): Promise<DriverResult>;
  releaseLease(call: LeaseCall): Promise<DriverResult>;
  /**
   * Optional: does the resource still exist, and is it healthy? Asked by the
   * resource's `check` (the collector's observe loop, or an operator) and
   * `repair`. Read-only, so safe to repeat; a driver without it is never
   * asked, and its resources are trusted as made.
   */
  checkResource?(call: ResourceCall): Promise<CheckResult>;
  /**
   * Optional: makes a slot fit for the next lease (a blueprint with
   * cleanBetweenLeases calls it for each slot a lease gave back, before the
   * slot may be granted again). Keyed and repeated like every call, so it
   * must be idempotent.
   */
  cleanSlot?(call: SlotCall): Promise<DriverResult>;
  /**
   * Optional: everything the driver holds for the blueprint, as it sees it
   * (the other half of observing: what no row may know of). The collector
   * compares it with the blueprint's resources (src/gc/findOrphans.ts). Read-only,
   * so safe to repeat; a driver without it is never listed.
   */
  listResources?(call: ListCall): Promise<ListResult>;
  /**
   * Optional: removes one thing `listResources` reported that no resource
   * stands for (an orphan), when the blueprint's `orphans` setting says
   * `destroy`. Keyed and repeated like every call, so it must be idempotent:
   * an orphan already gone is success.
   */
  destroyOrphan?(call: OrphanCall): Promise<DriverResult>;
  /**
   * Optional: the slots it holds on one live resource, as it sees them (a
   * slot's directory, a user account): the collector compares them with
   * the slots Slipway's leases hold, and a slot no lease holds is an
   * orphan, freed (when the blueprint says `destroy`) by `cleanSlot`.
   * Read-only, so safe to repeat; a driver without it has no slot listed.
   */
  listSlots?(call: SlotListCall): Promise<SlotListResult>;
}

export interface DriverCall {
  readonly blueprint: { readonly id: number; readonly name: string; readonly settings: unknown; readonly labels: Labels };
  /** Object kind, object id and command id, e.g. "lease:12:345": stable across retries of one command. */
  readonly idempotencyKey: string;
  readonly commandId: number;
}

export interface ResourceCall extends DriverCall {
  readonly resource: {
    readonly id: number;
    readonly capacity: number;
    readonly attributes: Record<string, unknown>;
    /** The selector of the lease it was made for, if that lease has one: a driver choosing what to allocate picks what matches it. */
    readonly selector?: Selector;
  };
}

export interface SlotCall extends ResourceCall {
  readonly slot: number;
}

/** A listing is asked for outside any command: it has no idempotency key, only the blueprint. */
export type ListCall = Pick<DriverCall, 'blueprint'>;

/** A resource's slots are listed outside any command too: the blueprint and the resource. */
export type SlotListCall = ListCall & Pick<ResourceCall, 'resource'>;

/** The blueprint as every driver call names it, from its row. */
export function driverBlueprint(row: {
  readonly id: number;
  readonly name: string;
  readonly settings: unknown;
  readonly labels: unknown;
}): DriverCall['blueprint'] {
  return { id: row.id, name: row.name, settings: row.settings, labels: row.labels as Labels };
}

/** The resource as every driver call names it, from its row. */
export function driverResource(row: {
  readonly id: number;
  readonly capacity: number;
  readonly attributes: unknown;
  readonly selector: string | null;
}): ResourceCall['resource'] {
  return {
    id: row.id,
    capacity: row.capacity,
    attributes: row.attributes as Record<string, unknown>,
    ...(row.selector === null ? {} : { selector: parseSelector(row.selector) }),
  };
}

export interface OrphanCall extends DriverCall {
  /** As `listResources` reported it. */
  readonly orphan: ListedResource;
}

export interface LeaseCall extends DriverCall {
  readonly lease: { readonly id: number; readonly holder: string; readonly attributes: Record<string, unknown> };
  readonly resource: { readonly id: number; readonly attributes: Record<string, unknown> };
  readonly slot: number;
}

/**
 * What a driver may return: attributes merged into the object (a path, a host
 * name...), and, from allocateResource only, the resource's number of lease
 * slots when the driver knows it better than the blueprint's default (a
 * static pool's entry says how many leases its host takes).
 */
export const DriverResultSchema = z
  .object({
    attributes: z.record(z.string(), z.json()).optional(),
    capacity: z.number().int().min(1).max(10_000).optional(),
    /** At allocation: the resource's labels (the blueprint's go over them), which lease selectors are matched against. */
    labels: LabelsSchema.optional(),
  })
  .strict();
export type DriverResult = z.infer<typeof DriverResultSchema>;

/**
 * What a check answers: `healthy`; `unhealthy` (it exists but should take
 * no new leases: the resource is quarantined); or `gone` (it no longer
 * exists: the resource and its leases are broken). Absent means healthy, so
 * a probe program that exits 0 and prints nothing says so. The message says
 * why, for people.
 */
export const CheckResultSchema = z
  .object({
    health: z.enum(['healthy', 'unhealthy', 'gone']).default('healthy'),
    message: z.string().max(1000).optional(),
  })
  .strict();
export type CheckResult = z.input<typeof CheckResultSchema>;
export type CheckAnswer = z.output<typeof CheckResultSchema>;

/** A refinement of a list: no two of its items have the same `key`. */
export function distinctBy<K extends PropertyKey>(key: K): (items: ReadonlyArray<Readonly<Record<K, unknown>>>) => boolean {
  return (items) => new Set(items.map((item) => item[key])).size === items.length;
}

/**
 * One thing a driver holds: its own `id` for it (a path, an entry's name, a
 * cloud id), and what ties it to a resource row: the `resourceId` it was
 * made for, when the driver knows it (every call names the resource), and
 * attributes as the resource's would read (`{"path": ...}`), compared with
 * those of the blueprint's resources when it does not.
 */
export const ListedResourceSchema = z
  .object({
    id: z.string().min(1).max(1000),
    resourceId: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    attributes: z.record(z.string(), z.json()).default({}),
  })
  .strict();
export type ListedResource = z.output<typeof ListedResourceSchema>;

export const ListResultSchema = z
  .object({
    resources: z.array(ListedResourceSchema).max(100_000).refine(distinctBy('id'), 'each listed resource must have an id of its own'),
  })
  .strict();
export type ListResult = z.input<typeof ListResultSchema>;
export type ListAnswer = z.output<typeof ListResultSchema>;

/** One slot a driver holds on a resource: its own `id` for it (a path, an account's name), and the slot's number. */
export const ListedSlotSchema = z
  .object({
    id: z.string().min(1).max(1000),
    slot: z.number().int().min(0).max(10_000),
  })
  .strict();
export type ListedSlot = z.output<typeof ListedSlotSchema>;

export const SlotListResultSchema = z
  .object({
    slots: z
      .array(ListedSlotSchema)
      .max(10_000)
      .refine(distinctBy('id'), 'each listed slot must have an id of its own')
      .refine(distinctBy('slot'), 'each listed slot must have a number of its own'),
  })
  .strict();
export type SlotListResult = z.input<typeof SlotListResultSchema>;
export type SlotListAnswer = z.output<typeof SlotListResultSchema>;

export type DriverOperation = keyof Driver;

/** Every operation of the Driver interface, in lifecycle order. */
export const DRIVER_OPERATIONS = [
  'allocateResource',
  'activateResource',
  'destroyResource',
  'acquireLease',
  'activateLease',
  'releaseLease',
  'checkResource',
  'cleanSlot',
  'listResources',
  'destroyOrphan',
  'listSlots',
] as const satisfies readonly DriverOperation[];

export class TransientDriverError extends Error {
  override name = 'TransientDriverError';
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export class PermanentDriverError extends Error {
  override name = 'PermanentDriverError';
}

/** A kind of driver: its name, the settings a blueprint gives it, and how to make one. */
export interface DriverFactory<S = unknown> {
  readonly name: string;
  readonly description: string;
  readonly settingsSchema: z.ZodType<S>;
  create(settings: S, services: DriverServices): Driver;
  /**
   * For drivers whose resources follow their settings (a static pool's
   * entries): called in the blueprint's drain, inside its transaction, when
   * its settings change; says which live resources no longer fit the new
   * settings and what the blueprint's resource limit becomes.
   */
  reconcile?(trx: Db, blueprintId: number, settings: S): Promise<Reconciliation>;
  /**
   * Every set of labels this driver may report for a resource under these
   * settings (a static pool's entries' labels), so that a selector nothing
   * can match is refused when it is asked for. Left out: the driver may
   * report any labels (a program's output), and only the blueprint's own
   * labels are known in advance.
   */
  possibleLabels?(settings: S): readonly Labels[];
}

export interface Reconciliation {
  /** Live resources to retire: they take no new leases and are destroyed when their leases end. */
  readonly retire: ReadonlyArray<{ readonly resourceId: number; readonly reason: string }>;
  /** The blueprint's new max_resources, when the settings decide it. */
  readonly maxResources?: number;
}

/** What Slipway lends a driver. */
export interface DriverServices {
  /** Runs one statement outside any drain transaction (the simulated driver's "outside world"). */
  query(text: string, values: unknown[]): Promise<unknown>;
}
