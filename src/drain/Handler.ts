import type { CompiledQuery, Updateable } from 'kysely';
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
import type { CommandKindOf, PayloadOf, SupersedesNothing } from '../domain/commandKinds.ts';
import type { Driver, DriverCall } from '../drivers/Driver.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { FollowUp } from './messages.ts';

export interface ObjectTypes {
  lease: { row: LeaseRow; update: Updateable<LeasesTable> };
  resource: { row: ResourceRow; update: Updateable<ResourcesTable> };
  blueprint: { row: BlueprintRow; update: Updateable<BlueprintsTable> };
}

/** An event an outcome records, on its object's timeline unless `on` names another object's (a slot a lease gave back, on its resource's). */
export interface OutcomeEvent {
  readonly type: string;
  readonly message: string;
  readonly data?: unknown;
  readonly on?: ObjectRef;
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
  /**
   * A state the object passes through on its way to `to` within this one
   * command, recorded as a transition of its own (each step checked against
   * the state table): a lease's release ends it at once, released then
   * destroyed, rather than leaving a second command to finish it.
   */
  readonly through?: { readonly state: string; readonly message: string };
  readonly set?: ObjectTypes[K]['update'];
  readonly events?: readonly OutcomeEvent[];
  readonly followUps?: readonly FollowUp[];
  readonly retryInMs?: number;
}

/** What a handler is given: its payload typed by its kind's latest schema (see PayloadOf and HandlerTable), and what its declared read found. */
export interface HandlerContext<K extends ObjectKind, P = unknown, R = unknown> {
  readonly object: ObjectTypes[K]['row'];
  readonly command: CommandRow;
  readonly payload: P;
  /** The object's blueprint (for a blueprint, itself). */
  readonly blueprint: BlueprintRow;
  /** What the handler's `read` found for this object (undefined without one, or when its key was undefined). */
  readonly read: R | undefined;
  /**
   * The commands the drain read for the object's run in this step (those
   * after its head, up to a run's length, see sql/runs.ts; for a command of
   * the run, itself and those decided before it included): a decision may
   * read ahead for them in its own round trip (see reads/requestingLease.ts).
   */
  readonly queued: readonly CommandRow[];
  /**
   * Queries for `effect`, on the pool, outside any transaction (an effect
   * may outlive its step). `decide` queries through its `trx` argument.
   */
  readonly db: Db;
  /** The blueprint's driver, with its output validated. */
  driver(): Driver;
  /** Identity of this call for the driver. */
  readonly call: DriverCall;
}

/**
 * A read that the handlers of many objects share: the drain makes it once
 * per step for every object whose handler declares it (one statement for all
 * of them), before the effects run, so a batch of 64 releases costs one read
 * rather than 64.
 */
export interface BatchRead<R, C = HandlerContext<ObjectKind>> {
  /** What this object's read is about (say, its resource's id); undefined: nothing to read. */
  key(ctx: C): number | undefined;
  /** Reads every key at once. */
  load(db: Db, keys: readonly number[]): Promise<ReadonlyMap<number, R>>;
}

/**
 * Statements the decisions of one handler share across a step, made under
 * the step's row locks: one set for every object of the step whose head the
 * handler decides (a write only the objects' single writer makes, such as a
 * slot row's delete, must cover only heads the step is sure to decide that
 * way). They run in order, each with a snapshot of its own, so a later one
 * sees what the rows an earlier one waited to lock were left as. The drain
 * sends them in the round trip that opens the step's transaction, or, when
 * objects of a kind decided earlier are in the step (DECISION_ORDER in
 * DrainLane), just before it decides the first of this kind, so they do
 * not see them; and hands their results to `keep`, which holds them for
 * the decisions (perStep). A decision they did not cover asks for itself.
 */
export interface LockedBatch<C = HandlerContext<ObjectKind>> {
  /** The statements for the step's heads; none: nothing needed. */
  statements(heads: readonly C[]): readonly CompiledQuery[];
  /** Keeps what they answered (each one's rows, in order) for the step's decisions, on the step's `trx`. */
  keep(trx: Db, results: readonly (readonly unknown[])[]): void;
}

/**
 * How one command kind is applied to one kind of object. What it needs is
 * declared by its shape, so the drain plans each step's round trips before
 * it runs any, and a combination the drain cannot honour does not compile:
 *
 * - `pure`: decides from its context alone; `decide` gets no Db, and costs
 *   the step no round trip;
 * - `querying`: its decision queries under the step's row locks (a
 *   capacity decision), so the step opens its transaction before the
 *   decisions run;
 * - `effectful`: calls its driver (`effect`) before it decides, outside any
 *   transaction; the effects of a step's objects run concurrently. It may
 *   declare a batched `read`, made before the effect (see BatchRead), and
 *   whether its decision queries under the row locks (`readsInTransaction`,
 *   as `querying` does, or a predicate of its context, asked before the
 *   decision, for a handler that queries only in some cases: the common
 *   case then costs the step nothing); without it the decision's Db
 *   refuses every query;
 * - `lockedBatch`: shares statements with the step's other decisions of
 *   its handler under the row locks, one set for the step (see
 *   LockedBatch): a step with one opens its transaction first, and its
 *   decision queries there (`readsInTransaction` is required). It may
 *   declare a `read` and an `effect`, as `effectful` does.
 *
 * A `pure` or `querying` handler may join runs (`inRuns`): the command may
 * be decided right after another command of the same object in one step (a
 * run, see DrainLane), on the row as that one's outcome left it in memory.
 * Only for a kind that supersedes nothing (SupersedesNothing: `inRuns` on
 * another does not compile), and a handler whose decision reads its object
 * only from `ctx.object` and otherwise only rows that decisions write
 * directly in the step's transaction (not the commands, events or object
 * rows the commit writes after the decisions), and whose `set` holds plain
 * column values (test/engine/handlerRuns.test.ts checks what can be checked).
 *
 * `decide` returns the outcome to commit.
 */
// biome-ignore lint/suspicious/noExplicitAny: a table holds handlers of every effect, payload and read type; each handler's own are checked where it is written (HandlerTable)
export type CommandHandler<K extends ObjectKind, E = any, P = any, R = any, Runs extends boolean = boolean> =
  | PureHandler<K, P, Runs>
  | QueryingHandler<K, P, Runs>
  | EffectfulHandler<K, E, P, R>
  | LockedBatchHandler<K, E, P, R>;

/** `true` where the kind may join runs; absent where it may not. */
type InRuns<Runs extends boolean> = { readonly inRuns?: Runs extends true ? true : never };

export type PureHandler<K extends ObjectKind, P, Runs extends boolean = boolean> = InRuns<Runs> & {
  readonly shape: 'pure';
  decide(ctx: HandlerContext<K, P>): Promise<Outcome<K>> | Outcome<K>;
};

export type QueryingHandler<K extends ObjectKind, P, Runs extends boolean = boolean> = InRuns<Runs> & {
  readonly shape: 'querying';
  decide(trx: Db, ctx: HandlerContext<K, P>): Promise<Outcome<K>> | Outcome<K>;
};

/** Whether a decision queries under the step's row locks: always, or when its context says so. */
type ReadsInTransaction<C> = true | ((ctx: C) => boolean);

export interface EffectfulHandler<K extends ObjectKind, E, P, R> {
  readonly shape: 'effectful';
  readonly read?: BatchRead<R, HandlerContext<K, P, R>>;
  effect(ctx: HandlerContext<K, P, R>): Promise<E>;
  readonly readsInTransaction?: ReadsInTransaction<HandlerContext<K, P, R>>;
  decide(trx: Db, ctx: HandlerContext<K, P, R>, effect: E): Promise<Outcome<K>> | Outcome<K>;
}

export interface LockedBatchHandler<K extends ObjectKind, E, P, R> {
  readonly shape: 'lockedBatch';
  readonly lockedBatch: LockedBatch<HandlerContext<K, P, R>>;
  readonly read?: BatchRead<R, HandlerContext<K, P, R>>;
  effect?(ctx: HandlerContext<K, P, R>): Promise<E>;
  readonly readsInTransaction: ReadsInTransaction<HandlerContext<K, P, R>>;
  decide(trx: Db, ctx: HandlerContext<K, P, R>, effect: E): Promise<Outcome<K>> | Outcome<K>;
}

/**
 * Whether the handler's decision queries under the step's row locks. Without
 * a context (a command that may join a run, not yet decided), a predicate
 * counts as yes.
 */
export function readsInTransaction<K extends ObjectKind>(handler: CommandHandler<K> | undefined, ctx?: HandlerContext<K>): boolean {
  if (!handler) return false;
  switch (handler.shape) {
    case 'pure':
      return false;
    case 'querying':
      return true;
    default: {
      const reads = handler.readsInTransaction;
      if (typeof reads === 'function') return ctx === undefined || reads(ctx);
      return reads === true;
    }
  }
}

/** The handler's batched read, made before its effect, if it declares one. */
export function batchReadOf<K extends ObjectKind>(handler: CommandHandler<K> | undefined): BatchRead<unknown, HandlerContext<K>> | undefined {
  return handler?.shape === 'effectful' || handler?.shape === 'lockedBatch' ? handler.read : undefined;
}

/** The statements the handler's decisions share under the step's row locks, if it has them. */
export function lockedBatchOf<K extends ObjectKind>(handler: CommandHandler<K> | undefined): LockedBatch<HandlerContext<K>> | undefined {
  return handler?.shape === 'lockedBatch' ? handler.lockedBatch : undefined;
}

/** Whether the handler calls its driver before it decides. */
export function hasEffect<K extends ObjectKind>(
  handler: CommandHandler<K> | undefined,
): handler is
  | EffectfulHandler<K, unknown, unknown, unknown>
  | (LockedBatchHandler<K, unknown, unknown, unknown> & Pick<EffectfulHandler<K, unknown, unknown, unknown>, 'effect'>) {
  return handler?.shape === 'effectful' || (handler?.shape === 'lockedBatch' && handler.effect !== undefined);
}

/** Whether the handler's commands may join runs (see CommandHandler). */
export function joinsRuns<K extends ObjectKind>(handler: CommandHandler<K>): boolean {
  return (handler.shape === 'pure' || handler.shape === 'querying') && handler.inRuns === true;
}

/**
 * The handler of command kind `C` on a `K`: its payload is the kind's
 * latest schema's, and it may join runs only if the kind supersedes
 * nothing. A handler that expects another payload does not compile.
 */
// biome-ignore lint/suspicious/noExplicitAny: each handler's effect and read types are its own; the drain passes them back to the same handler's decide
export type HandlerOf<K extends ObjectKind, C extends CommandKindOf<K>> = CommandHandler<K, any, PayloadOf<K, C>, any, SupersedesNothing<K, C>>;

/** One kind of object's handlers, by command kind: a kind that does not exist does not compile. */
export type HandlerTable<K extends ObjectKind> = { readonly [C in CommandKindOf<K>]?: HandlerOf<K, C> };

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
