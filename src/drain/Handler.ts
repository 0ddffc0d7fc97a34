import type { Updateable } from 'kysely';
import type {
  BlueprintRow,
  BlueprintsTable,
  CommandRow,
  LeaseRow,
  LeasesTable,
  ObjectKind,
  ResourceRow,
  ResourcesTable,
} from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { CommandKindOf, PayloadOf } from '../domain/commandKinds.ts';
import type { Driver, DriverCall } from '../drivers/Driver.ts';
import type { ObjectRef } from '../queue/objectTables.ts';

export interface ObjectTypes {
  lease: { row: LeaseRow; update: Updateable<LeasesTable> };
  resource: { row: ResourceRow; update: Updateable<ResourcesTable> };
  blueprint: { row: BlueprintRow; update: Updateable<BlueprintsTable> };
}

/** A command for another object (or this one) that this command leads to. */
export interface FollowUp {
  readonly target: ObjectRef;
  readonly kind: string;
  readonly payload?: unknown;
  readonly reason: string;
  readonly notBeforeMs?: number;
}

/**
 * What applying a command decided. The drain commits all of it in one
 * transaction: the object's new state and columns (version-checked), the
 * command's status and message, event rows, and follow-up commands.
 */
export interface Outcome<K extends ObjectKind = ObjectKind> {
  /** done/failed settle the command; yield leaves it queued until retryInMs. */
  readonly status: 'done' | 'failed' | 'yield';
  readonly message: string;
  readonly to?: string;
  readonly set?: ObjectTypes[K]['update'];
  readonly events?: ReadonlyArray<{ type: string; message: string; data?: unknown }>;
  readonly followUps?: readonly FollowUp[];
  readonly retryInMs?: number;
}

/** What a handler is given: its payload typed by its kind's latest schema (see PayloadOf and HandlerTable). */
export interface HandlerContext<K extends ObjectKind, P = unknown> {
  readonly object: ObjectTypes[K]['row'];
  readonly command: CommandRow;
  readonly payload: P;
  /** The object's blueprint (for a blueprint, itself). */
  readonly blueprint: BlueprintRow;
  /** For reads outside the outcome transaction (effects). */
  readonly db: Db;
  /** The blueprint's driver, with its output validated. */
  driver(): Driver;
  /** Identity of this call for the driver. */
  readonly call: DriverCall;
}

/**
 * How one command kind is applied to one kind of object.
 *
 * `effect` runs outside any transaction and is where drivers are called.
 * `decide` runs inside the outcome transaction (reads with locks, writes to
 * the object's own side tables) and returns the outcome to commit.
 */
export interface CommandHandler<K extends ObjectKind, E = any, P = any> {
  effect?(ctx: HandlerContext<K, P>): Promise<E>;
  decide(trx: Db, ctx: HandlerContext<K, P>, effect: E): Promise<Outcome<K>>;
}

/**
 * One kind of object's handlers, by command kind, each with the payload its
 * kind's schema says: a handler that expects another payload, or a kind
 * that does not exist, does not compile.
 */
export type HandlerTable<K extends ObjectKind> = { readonly [C in CommandKindOf<K>]?: CommandHandler<K, any, PayloadOf<K, C>> };

export const done = <K extends ObjectKind>(message: string, rest: Omit<Outcome<K>, 'status' | 'message'> = {}): Outcome<K> => ({
  status: 'done',
  message,
  ...rest,
});

export const failed = <K extends ObjectKind>(message: string, rest: Omit<Outcome<K>, 'status' | 'message'> = {}): Outcome<K> => ({
  status: 'failed',
  message,
  ...rest,
});

export const yieldFor = <K extends ObjectKind>(retryInMs: number, message: string): Outcome<K> => ({
  status: 'yield',
  message,
  retryInMs,
});

/** Merges a driver's returned attributes into the object's. */
export function mergedAttributes(current: unknown, added: Record<string, unknown> | undefined): string {
  return JSON.stringify({ ...((current as Record<string, unknown>) ?? {}), ...(added ?? {}) });
}
