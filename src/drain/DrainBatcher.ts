import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import type { Logger } from '../log.ts';
import { recordBatchCommitted } from '../metrics/metrics.ts';
import { commandStep, driverCall } from './commandStep.ts';
import type { HandlerContext, ObjectTypes, Outcome } from './Handler.ts';
import type { ObjectDrain } from './ObjectDrain.ts';
import { type BatchedKind, type BatchedOutcome, runBatchStep } from './sql/batchedHolds.ts';

/** The most objects one batch holds at once. */
const MAX_BATCH = 64;
/**
 * Batches under way at once per kind, each on a connection of its own; an
 * object that arrives while they are all busy joins one at its next step.
 */
const MAX_BATCHES = 2;
/**
 * The kinds drained in batches. A blueprint's every command queries (it
 * decides capacity under its row lock), so blueprints go straight to the
 * per-object drain; so do resources, nearly all of whose commands call a
 * driver or read their slots. A lease's release while it waits for a slot
 * and its destroy after that (the commands of a lease released before it
 * was served) need nothing but the lease's own row and queue.
 */
const BATCHED: ReadonlySet<ObjectKind> = new Set<BatchedKind>(['lease']);
const isBatched = (kind: ObjectKind): kind is BatchedKind => BATCHED.has(kind);

/** Connections the batches of one worker hold at most (each on its own). */
export const BATCH_CONNECTIONS = MAX_BATCHES * BATCHED.size;

type ObjectRow = ObjectTypes[BatchedKind]['row'];

/** A drain job's request: drain this object; settles with the number of commands applied. */
interface Request {
  readonly id: number;
  resolve(applied: number): void;
  reject(error: unknown): void;
}

/** An object whose lock a batch holds, with the command to apply next. */
interface Held {
  readonly request: Request;
  object: ObjectRow;
  head: CommandRow;
  readonly blueprint: BlueprintRow;
  applied: number;
}

/** A handler wanted the database or a driver: the object needs a connection of its own. */
class NeedsOwnConnection extends Error {
  override name = 'NeedsOwnConnection';
}

/** Queries fail at once: a batch decides only what needs no I/O. */
const NO_QUERIES: Db = kyselyOnClient({ query: () => Promise.reject(new NeedsOwnConnection('a query')) } as unknown as pg.PoolClient);

/**
 * Drains many objects of one kind on one connection, one step for all of
 * them per round trip, where the per-object drain (ObjectDrain) takes a
 * round trip per object per command. PostgreSQL's cost is per statement, not
 * per row: the batch's statements are the per-object drain's, set-based
 * (migrations/0013_batched_drain.ts, sql/batchedHolds.ts).
 *
 * The protocol is ObjectDrain's, for many objects at once: each object's
 * session advisory lock is held on the batch's connection from the start of
 * its hold to its end; each step commits the outcome of every held object's
 * ready command in ONE transaction (rows locked in job key order and
 * version-checked, states, events, statuses, superseded work, follow-ups,
 * wake-ups), then reads each object's next command or ends its hold (the
 * unlock, a last look, the notices).
 *
 * A batch applies only what it can decide with no I/O: a handler that makes
 * a query or calls a driver, or whose outcome writes more than the object's
 * state, fails here harmlessly (nothing was written), and the object's lock
 * is given back and the object handed to ObjectDrain, which takes it again
 * and goes on from the same command. A lease released while it waited for a
 * slot (release, destroy) never leaves the batch.
 *
 * A step that fails (a version conflict, a deadlock, a lost connection)
 * discards its connection, which ends the session and so frees every lock
 * the batch held, and each of its objects is drained on its own by
 * ObjectDrain, which finds in the database whether the step committed.
 */
export class DrainBatcher {
  private readonly waiting = new Map<BatchedKind, Request[]>();
  private readonly running = new Map<BatchedKind, number>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly perObject: ObjectDrain,
    private readonly log: Logger,
    private readonly options: {
      readonly chaosDelayMs: number;
      /**
       * Objects drained on their own at once (each holds a connection, and
       * a driver call from it borrows a second: see workerPoolSize); the
       * rest wait for a turn, holding nothing.
       */
      readonly aloneAtOnce: number;
    },
  ) {
    this.turns = options.aloneAtOnce;
  }

  /** Turns free for drains on their own, and the drains waiting for one. */
  private turns: number;
  private readonly waitingForTurn: (() => void)[] = [];

  /** Drains the object's queue; resolves with the number of commands applied. */
  drain(kind: ObjectKind, id: number): Promise<number> {
    if (!isBatched(kind)) return this.drainOnItsOwn(kind, id);
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(kind) ?? [];
      queue.push({ id, resolve, reject });
      this.waiting.set(kind, queue);
      this.startBatch(kind);
    });
  }

  private startBatch(kind: BatchedKind): void {
    const running = this.running.get(kind) ?? 0;
    if (running >= MAX_BATCHES || (this.waiting.get(kind)?.length ?? 0) === 0) return;
    this.running.set(kind, running + 1);
    void this.runBatch(kind).finally(() => {
      this.running.set(kind, this.running.get(kind)! - 1);
      this.startBatch(kind);
    });
  }

  /**
   * Takes up to `room` waiting requests. A request for an object this batch
   * already holds is answered at once: the holder looks at the queue again
   * as it lets go (as when another worker holds the lock), and locking it a
   * second time on the same session would outlive the unlock.
   */
  private arrivals(kind: BatchedKind, room: number, held: ReadonlyMap<number, Held>): Request[] {
    const queue = this.waiting.get(kind) ?? [];
    const taken = new Map<number, Request>();
    while (queue.length > 0 && taken.size < room) {
      const request = queue.shift()!;
      if (held.has(request.id) || taken.has(request.id)) request.resolve(0);
      else taken.set(request.id, request);
    }
    return [...taken.values()];
  }

  private async runBatch(kind: BatchedKind): Promise<void> {
    const held = new Map<number, Held>();
    let arriving: Request[] = [];
    let client: pg.PoolClient | undefined;
    let failure: Error | undefined;
    try {
      client = await this.pool.connect();
      const db = kyselyOnClient(client);
      for (;;) {
        arriving = this.arrivals(kind, MAX_BATCH - held.size, held);
        if (held.size === 0 && arriving.length === 0) return;
        if (this.options.chaosDelayMs > 0 && held.size > 0) await sleep(Math.random() * this.options.chaosDelayMs);

        const pickedUpAt = Date.now();
        const committed: BatchedOutcome<ObjectRow>[] = [];
        const handedOff: Held[] = [];
        for (const h of held.values()) {
          const outcome = await this.decideWithoutIo(kind, h);
          if (outcome) committed.push({ target: { kind, id: h.object.id }, object: h.object, command: h.head, outcome });
          else handedOff.push(h);
        }
        const step = await runBatchStep(client, db, kind, {
          committed,
          handedOff: handedOff.map((h) => h.object.id),
          arriving: arriving.map((r) => r.id),
        });

        recordBatchCommitted(committed, pickedUpAt);
        for (const row of step.updated) held.get(row.id)!.object = row;
        const next = new Map(step.nextHeads.map((c) => [c.target_id, c]));
        for (const c of committed) {
          const h = held.get(c.object.id)!;
          h.applied++;
          const head = next.get(c.object.id);
          if (head) h.head = head;
          else {
            held.delete(c.object.id);
            h.request.resolve(h.applied);
          }
        }
        for (const h of handedOff) {
          held.delete(h.object.id);
          this.drainAlone(kind, h.request, h.applied);
        }
        const started = new Map(step.startedHeads.map((c) => [c.target_id, c]));
        const rows = new Map(step.startedRows.map((r) => [r.id, r]));
        const blueprints = new Map(step.startedBlueprints.map((b) => [b.id, b]));
        for (const request of arriving) {
          const head = started.get(request.id);
          const object = rows.get(request.id);
          if (!head) request.resolve(0);
          // Fails the step: its connection is discarded (freeing the lock) and the per-object drain reports it.
          else if (!object) throw new Error(`${kind} ${request.id} has commands but no row`);
          else {
            held.set(request.id, { request, object, head, blueprint: blueprints.get(object.blueprint_id)!, applied: 0 });
          }
        }
        arriving = [];
      }
    } catch (error) {
      failure = error as Error;
      // No connection: fail the jobs waiting for one (graphile-worker retries them) rather than spin.
      if (!client) for (const request of this.waiting.get(kind)?.splice(0) ?? []) request.reject(error);
      this.log.warn({ err: error, objects: held.size + arriving.length, kind }, 'batched drain step failed; draining its objects one at a time');
    } finally {
      client?.release(failure);
    }
    // Only once the failed connection is gone, and its locks with it: a
    // per-object drain that found one still taken would leave the object.
    for (const h of held.values()) this.drainAlone(kind, h.request, h.applied);
    for (const request of arriving) this.drainAlone(kind, request, 0);
  }

  /** Hands an object to the per-object drain, which takes its lock again and goes on from its queue head. */
  private drainAlone(kind: ObjectKind, request: Request, applied: number): void {
    this.drainOnItsOwn(kind, request.id).then((more) => request.resolve(applied + more), request.reject);
  }

  private async drainOnItsOwn(kind: ObjectKind, id: number): Promise<number> {
    if (this.turns > 0) this.turns--;
    else await new Promise<void>((resolve) => this.waitingForTurn.push(resolve));
    try {
      return await this.perObject.drain(kind, id);
    } finally {
      // The turn passes straight to the next in line, if any.
      const next = this.waitingForTurn.shift();
      if (next) next();
      else this.turns++;
    }
  }

  /**
   * The outcome of the held object's next command, if it can be decided
   * with no I/O and writes no more than the object's state; undefined: the
   * object goes to the per-object drain, which decides it again from the
   * start (nothing here wrote anything).
   */
  private async decideWithoutIo(kind: BatchedKind, h: Held): Promise<Outcome | undefined> {
    const target = { kind, id: h.object.id };
    const decided = commandStep(target, h.object.state, h.head);
    if (decided.step === 'unknown') return undefined;
    let outcome: Outcome;
    if (decided.step === 'settled') outcome = decided.outcome;
    else {
      const ctx: HandlerContext<ObjectKind> = {
        object: h.object,
        command: h.head,
        payload: decided.payload,
        blueprint: h.blueprint,
        db: NO_QUERIES,
        driver: () => {
          throw new NeedsOwnConnection('a driver call');
        },
        call: driverCall(target, h.head, h.blueprint),
      };
      try {
        const effect = decided.handler.effect ? await decided.handler.effect(ctx) : undefined;
        outcome = await decided.handler.decide(NO_QUERIES, ctx, effect);
      } catch (error) {
        if (!(error instanceof NeedsOwnConnection)) this.log.debug({ err: error, command: h.head.id }, 'handler failed in a batch');
        return undefined;
      }
    }
    return outcome.set === undefined ? outcome : undefined;
  }
}
