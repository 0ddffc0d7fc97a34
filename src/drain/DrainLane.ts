import { setTimeout as sleep } from 'node:timers/promises';
import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Database, Db } from '../db/Database.ts';
import { DISPATCH_CALLBACKS } from '../callbacks/dispatchCallbacks.ts';
import { compileOnly } from '../db/compileOnly.ts';
import { GENERIC_PLANS } from '../db/genericPlans.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import { simpleQueryText } from '../db/preparedText.ts';
import { PermanentDriverError, TransientDriverError } from '../drivers/Driver.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import type { Logger } from '../log.ts';
import { recordBatchCommitted, recordRowCommitted } from '../metrics/metrics.ts';
import type { ObjectRef } from '../queue/objectTables.ts';
import { wakeObjectsQuery } from '../queue/wakeObjects.ts';
import { rowAfter, runGoesOnAfter } from './commandRun.ts';
import { commandStep, driverCall, handlerOf } from './commandStep.ts';
import { asVersionConflict, type Decided, stepStatements } from './commitOutcome.ts';
import { driverFailure } from './driverFailure.ts';
import {
  type BatchRead,
  batchReadOf,
  type CommandHandler,
  type HandlerContext,
  hasEffect,
  joinsRuns,
  type LockedBatch,
  lockedBatchOf,
  type Outcome,
  readsInTransaction,
} from './Handler.ts';
import { commandNotice, noticesStatement } from './sql/announcements.ts';
import { claimStatement } from './sql/claim.ts';
import { ASYNCHRONOUS_BEGIN, NO_SEQ_SCANS, settings } from './sql/laneTransactions.ts';
import { lockVersionsStatement } from './sql/lockVersions.ts';
import { objectRowsStatements } from './sql/objectRows.ts';
import { runsStatement } from './sql/runs.ts';
import { type Held, keyOf, type ObjectRow, type Planned, type Results } from './laneTypes.ts';
import { RoundTrip, type RoundTripResults } from './roundTrip.ts';
import { RunningMarks } from './runningMarks.ts';
import { type CommittingLane, commitWithRetries } from './committer.ts';

/**
 * How long a step waits for the driver calls it started before it commits
 * the objects that are ready without the slower ones. A call that takes
 * longer (a VM booted, a terraform apply) stays in flight while its lane
 * goes on with the other objects it holds, and its object is decided in the
 * first step after the call returns: one slow call never holds up a batch.
 */
export const EFFECT_JOIN_MS = 50;

export interface LaneOptions {
  /** The most objects one lane holds at once. */
  readonly maxHeld: number;
  /** Upper bound of a random pause before each step (chaos testing). */
  readonly chaosDelayMs: number;
  /** How long a command this worker cannot run waits before another worker is tried. */
  readonly handOffAfterMs: number;
  /** Aborted when the worker stops: the lane ends after the step in progress. */
  readonly stopping: AbortSignal;
  /** Drain these objects and take no others (tests that decide what is applied when). */
  readonly only?: readonly ObjectRef[];
  /** Take these first if they are due (the objects the wake-up signal named), with their rows in the same round trip. */
  readonly named?: readonly ObjectRef[];
  /**
   * Where the running marks go, if not the lane's own pool. A step waits for
   * its marks before it commits, so a pool whose only connection is the
   * lane's would never give a mark one: a test that gives the lanes a single
   * connection (to read that session's state) passes another pool here. A
   * worker's pool has connections beyond its lanes (workerPoolSize.ts).
   */
  readonly marksPool?: pg.Pool;
}

/**
 * The order a step decides its objects in: blueprints, then resources, then
 * leases. A decision writes some rows as it decides (a resource's slot
 * rows, a blueprint's waiting line) and the rest (object rows, the
 * command's status, follow-ups) only as the step commits, and the step's
 * later decisions read in its transaction: a blueprint deciding after a
 * resource would see that resource half-applied. A resource that gave a
 * slot back earlier in the step, its row not yet written, looked full to its
 * blueprint, which put the asking lease in line; and the resource had found
 * the line still empty, so offered the slot to nobody. Blueprints first
 * read only what earlier steps committed, as if they were a transaction of
 * their own before the step; resources then see the line as the
 * blueprints leave it, and offer what they free to the leases it holds.
 */
const DECISION_ORDER: Record<ObjectKind, number> = { blueprint: 0, resource: 1, lease: 2 };

/**
 * One connection's share of a worker's drains: it holds the advisory locks of
 * up to `maxHeld` objects of any kind and applies their commands in steps,
 * a command per object per step, or a run of them: after the head, the
 * object's next ready commands (up to RUN_LENGTH) are decided one after
 * another on the row as the one before left it, for as long as their
 * handlers allow (`inRuns`, commandRun.ts), and committed together. A lone
 * object is a batch of one.
 *
 * A step, in round trips:
 * 1. the declared reads of the step's handlers, one statement per read for
 *    all of them (BatchRead), if any handler declares one;
 * 2. every effect at once, with no transaction open, on other connections
 *    of the pool; the step waits EFFECT_JOIN_MS for them, and a call still
 *    running then is left in flight, its command marked running
 *    (RunningMarks): its object joins a later step, the one after its call
 *    returns;
 * 3. if a decision queries under row locks (a `querying` handler's, or
 *    one whose `readsInTransaction` says so, see Handler.ts): `begin` and
 *    the rows locked and version-checked, with the statements the step's
 *    decisions share (LockedBatch) in the same round trip, then those
 *    decisions' own queries;
 * 4. ONE round trip that commits every outcome (sql/lockVersions.ts first,
 *    if 3 did not), then sends the step's notices in an asynchronously
 *    committed transaction of their own, then, in another, queues the jobs
 *    of the callback deliveries the commit made due
 *    (callbacks/dispatchCallbacks.ts), takes due wake-ups (the objects its
 *    follow-ups woke first: no wake-up signal is needed for work this lane
 *    picks up itself), reads every held object's next command, letting go
 *    of those with none (sql/claim.ts, sql/runs.ts), and reads the rows of
 *    the objects it took that its follow-ups woke;
 * 5. the rows of the other objects it took, if any.
 * A step of pure decisions and no driver calls is one round trip.
 *
 * The lock is a session advisory lock, so it spans the step's transactions
 * and driver calls; if the worker dies, PostgreSQL ends the session and frees
 * it, and the sweeper wakes what it held. Only the holder writes an object's
 * row, so the copy carried from each RETURNING is the row; every commit
 * checks that under a row lock all the same.
 */
export class DrainLane {
  private readonly held = new Map<string, Held>();
  /** Held objects whose driver call outlived the step that started it. */
  private readonly inFlight = new Map<string, Planned>();
  private applied = 0;
  /** Ends the wait of a lane whose every object waits on a driver call (see lookAgain). */
  private wakeWaiting: (() => void) | undefined;
  /** Asked to look for new work while it was not waiting: its next wait is skipped. */
  private lookAsked = false;
  private readonly pool: pg.Pool;
  /** Where the running marks go (LaneOptions.marksPool). */
  private readonly marksPool: pg.Pool;

  /**
   * `database`: the pool the lane takes its connection from, and its Kysely,
   * through which effects query (never the lane's connection: a call in
   * flight may outlive its step).
   */
  constructor(
    private readonly database: Pick<Database, 'pool' | 'db'>,
    private readonly drivers: DriverRegistry,
    private readonly log: Logger,
    private readonly options: LaneOptions,
  ) {
    this.pool = database.pool;
    this.marksPool = options.marksPool ?? database.pool;
  }

  /**
   * Takes due wake-ups and drains until it holds nothing; tells
   * `onFirstClaim` how many objects it took at first, and answers how many
   * commands it applied.
   */
  async run(onFirstClaim: (claimed: number) => void = () => {}): Promise<number> {
    const client = await this.pool.connect();
    let failure: Error | undefined;
    try {
      const only = this.options.only;
      const named = this.options.named ?? [];
      // Chosen objects are woken first, so they are taken whether or not a wake-up was waiting.
      const wake = only ? [wakeObjectsQuery(only).compile(COMPILER)] : [];
      const claim = only ? claimStatement(only.length, only, [], true) : claimStatement(this.options.maxHeld, named, []);
      // The named objects' rows, read after the claim has locked them (as a step's prefetch: rows of objects not taken are ignored).
      const prefetch = named.length > 0 && !only ? objectRowsStatements(named) : [];
      const first = new RoundTrip<'claimed' | 'prefetched'>()
        .add(...ASYNCHRONOUS_BEGIN, ...wake)
        .read('claimed', [claim])
        .read('prefetched', prefetch)
        .add('commit');
      const results = await this.send(client, first);
      const claimed = results.one('claimed').rows as CommandRow[];
      onFirstClaim(claimed.length);
      await this.adopt(client, claimed, results.get('prefetched'));
      while (this.held.size > 0) {
        if (this.options.stopping.aborted) {
          // The calls in flight are let finish and their outcomes committed, as a step's would be.
          if (this.inFlight.size > 0) await this.step(client, true);
          if (this.held.size > 0) throw new Error('worker stopping: objects handed back with commands still queued');
          break;
        }
        await this.step(client);
      }
      return this.applied;
    } catch (error) {
      failure = error as Error;
      if (!this.options.stopping.aborted) this.log.warn({ err: error, objects: this.held.size }, 'drain lane failed; its objects are woken again');
      return this.applied;
    } finally {
      // No lock is freed while a driver call of the lane is still running:
      // another worker would start the same command's call beside it.
      await Promise.all([...this.inFlight.values()].map((p) => p.running));
      this.inFlight.clear();
      // A connection that failed is discarded, never reused: its session
      // ends, which ends any transaction and frees every lock it held.
      client.release(failure);
      if (failure) await this.handBack();
    }
  }

  /**
   * New work is due that no new lane will take (its worker runs all the
   * lanes it may): if every object this lane holds waits on a driver call,
   * it stops waiting and looks for it now, rather than when a call returns.
   * A lane busy with a step takes new work as the step ends anyway.
   */
  lookAgain(): void {
    if (this.wakeWaiting) this.wakeWaiting();
    else this.lookAsked = true;
  }

  /** Wakes the objects a failed lane held, for another lane or worker (the sweeper, if the database is down now). */
  private async handBack(): Promise<void> {
    const refs = [...this.held.values()].map((h) => h.ref);
    this.held.clear();
    if (refs.length === 0) return;
    const wake = wakeObjectsQuery(refs).compile(COMPILER);
    await this.pool.query(wake.sql, [...wake.parameters]).catch(() => undefined);
  }

  /**
   * Holds newly locked objects with their first commands. Their rows come
   * from `prefetched` (read in the claim's round trip, after the lock) where
   * it has them, the rest in one more round trip.
   */
  private async adopt(client: pg.PoolClient, heads: readonly CommandRow[], prefetched?: Results): Promise<void> {
    if (heads.length === 0) return;
    const refOf = (h: CommandRow): ObjectRef => ({ kind: h.target_kind, id: h.target_id });
    const { rows, blueprintRows } = objectRows(prefetched ?? []);
    const missing = heads.filter((h) => !rows.has(keyOf(refOf(h))));
    if (missing.length > 0) {
      // In a transaction of its own for its planner settings' sake (it writes nothing).
      const trip = new RoundTrip<'rows'>()
        .add(...ASYNCHRONOUS_BEGIN)
        .read('rows', objectRowsStatements(missing.map(refOf)))
        .add('commit');
      const read = objectRows((await this.send(client, trip)).get('rows'));
      for (const [key, row] of read.rows) rows.set(key, row);
      for (const [id, row] of read.blueprintRows) blueprintRows.set(id, row);
    }
    for (const head of heads) {
      const ref = { kind: head.target_kind, id: head.target_id };
      const object = rows.get(keyOf(ref));
      // Fails the lane: its connection is discarded, freeing the lock.
      if (!object) throw new Error(`${ref.kind} ${ref.id} has commands but no row`);
      const blueprintId = ref.kind === 'blueprint' ? ref.id : (object as { blueprint_id: number }).blueprint_id;
      this.held.set(keyOf(ref), { ref, object, blueprint: blueprintRows.get(blueprintId)!, head, following: [] });
    }
  }

  /**
   * Plans the held objects not in flight, starts their effects, and commits
   * every object that is ready: those without a call, those whose call
   * returned within EFFECT_JOIN_MS, and those whose earlier call has since
   * returned. `finishing`: plans nothing new and waits for every call in
   * flight (the worker is stopping).
   */
  private async step(client: pg.PoolClient, finishing = false): Promise<void> {
    if (this.options.chaosDelayMs > 0) await sleep(Math.random() * this.options.chaosDelayMs);
    const pickedUpAt = Date.now();
    const marks = new RunningMarks(this.marksPool, this.log);
    const fresh = finishing ? [] : [...this.held.values()].filter((h) => !this.inFlight.has(keyOf(h.ref))).map((h) => this.plan(h, marks));
    await readAll(kyselyOnClient(client), fresh);
    for (const p of fresh) {
      if (!hasEffect(p.handler) || p.outcome) continue;
      p.running = this.runEffect(p).then(() => {
        p.effectDone = true;
      });
      this.inFlight.set(keyOf(p.held.ref), p);
    }
    const started = fresh.filter((p) => p.running);
    const ready = fresh.filter((p) => !p.running);
    if (finishing) await Promise.all([...this.inFlight.values()].map((p) => p.running));
    else if (started.length > 0) await Promise.race([Promise.all(started.map((p) => p.running)), sleep(EFFECT_JOIN_MS)]);
    else if (ready.length === 0 && ![...this.inFlight.values()].some((p) => p.effectDone)) {
      // Every held object waits on a call: wait for the first to return, or to be asked to look for new work (lookAgain).
      if (!this.lookAsked) {
        const asked = new Promise<void>((resolve) => {
          this.wakeWaiting = resolve;
        });
        await Promise.race([...[...this.inFlight.values()].map((p) => p.running), asked]);
        this.wakeWaiting = undefined;
      }
    }
    this.lookAsked = false;
    marks.markOutlived(started.filter((p) => !p.effectDone));
    for (const [key, p] of this.inFlight) {
      if (!p.effectDone) continue;
      this.inFlight.delete(key);
      ready.push(p);
    }
    // A mark still on its way must land before the outcome that replaces it.
    await Promise.all(ready.map((p) => p.marked));
    await commitWithRetries(client, ready, this.committing(client, pickedUpAt), this.log);
  }

  /** What the state table and payload say of the held object's command, and its handler's context. */
  private plan(held: Held, marks: RunningMarks): Planned {
    const decided = commandStep(held.ref, held.object.state, held.head);
    if (decided.step === 'unknown') return { held, handOff: decided.note };
    if (decided.step === 'settled') return { held, outcome: decided.outcome };
    return { held, handler: decided.handler, ctx: this.context(held, held.object, held.head, decided.payload, marks) };
  }

  private context(held: Held, object: ObjectRow, command: CommandRow, payload: unknown, marks: RunningMarks): HandlerContext<ObjectKind> {
    const { ref, blueprint } = held;
    const drivers = this.drivers;
    return {
      object,
      command,
      payload,
      blueprint,
      read: undefined,
      queued: held.following,
      db: this.database.db,
      driver: () => validatingDriver(drivers.forBlueprint(blueprint), async () => marks.called(command.id), blueprint.driver),
      call: driverCall(ref, command, blueprint),
    };
  }

  /**
   * The commands after `p`'s head that join its run, decided in order, each
   * on the row as the one before left it (see commandRun.ts).
   */
  private async decideRun(trx: Db, p: Planned, head: Decided): Promise<Decided[]> {
    const { ref } = p.held;
    const run: Decided[] = [];
    let last = head;
    let handler = p.handler;
    // Handlers in runs call no driver; their contexts still carry one, as every context does.
    const marks = new RunningMarks(this.marksPool, this.log);
    for (const command of p.held.following) {
      if (!runGoesOnAfter(ref.kind, last.command.kind, handler, last.outcome)) break;
      const object = rowAfter(last.object as ObjectRow, last.outcome);
      const step = commandStep(ref, object.state, command);
      if (step.step === 'unknown' || (step.step === 'handle' && !joinsRuns(step.handler))) break;
      handler = step.step === 'handle' ? step.handler : undefined;
      let outcome: Outcome;
      if (step.step === 'settled') outcome = step.outcome;
      else {
        const ctx = this.context(p.held, object, command, step.payload, marks);
        outcome = await decision(trx, step.handler, ctx, ref, command.kind, undefined);
      }
      last = { target: ref, object, command, outcome };
      run.push(last);
    }
    return run;
  }

  private async runEffect(p: Planned): Promise<void> {
    if (!hasEffect(p.handler) || p.outcome) return;
    try {
      p.effect = await p.handler.effect(p.ctx!);
    } catch (error) {
      const { ref, object, head } = p.held;
      p.outcome = driverFailure(ref.kind, object.state, head, error as Error);
      // A failure the driver reports (its Transient/PermanentDriverError) is an outcome, not a fault: its message says it all.
      const reported = error instanceof TransientDriverError || error instanceof PermanentDriverError;
      const why = reported ? { error: `${error.name}: ${error.message}` } : { err: error };
      this.log.warn({ ...why, command: head.id, kind: head.kind, target: keyOf(ref) }, 'driver call failed');
    }
  }

  /** What the committer (committer.ts) asks of the lane: to decide and commit, send a round trip, let an object go. */
  private committing(client: pg.PoolClient, pickedUpAt: number): CommittingLane {
    return {
      decideAndCommit: (planned, runs) => this.decideAndCommit(client, planned, pickedUpAt, runs),
      send: (trip) => this.send(client, trip),
      letGo: (ref) => {
        this.held.delete(keyOf(ref));
      },
    };
  }

  private async decideAndCommit(client: pg.PoolClient, planned: readonly Planned[], pickedUpAt: number, runs: boolean): Promise<void> {
    const applying = planned.filter((p) => !p.handOff).sort((a, b) => DECISION_ORDER[a.held.ref.kind] - DECISION_ORDER[b.held.ref.kind]);
    const lock = lockVersionsStatement(applying.map((p) => ({ ...p.held.ref, version: p.held.object.version })));
    const batches = lockedBatches(applying);
    // A locked batch writes (a slot row's delete): it runs in the step's transaction whatever its handler declares.
    const inTransaction =
      batches.size > 0 ||
      applying.some(
        (p) =>
          (!p.outcome && readsInTransaction(p.handler, p.ctx)) ||
          (runs && p.held.following.some((c) => readsInTransaction(handlerOf(p.held.ref.kind, c.kind)))),
      );
    const trx = kyselyOnClient(client);
    // The transaction's opening goes out with the first batches, those of the first kind decided.
    let unopened: (string | CompiledQuery)[] = inTransaction ? ['begin', settings(NO_SEQ_SCANS), lock] : [];
    const sendBatches = async (kind: ObjectKind) => {
      const due = batches.get(kind) ?? [];
      batches.delete(kind);
      if (unopened.length === 0 && due.length === 0) return;
      const trip = new RoundTrip<'batches'>().add(...unopened).read(
        'batches',
        due.flatMap((b) => b.statements),
      );
      const results = (await this.send(client, trip)).get('batches');
      unopened = [];
      let n = 0;
      for (const b of due)
        b.batch.keep(
          trx,
          b.statements.map(() => results[n++]!.rows),
        );
    };
    if (applying.length > 0) await sendBatches(applying[0]!.held.ref.kind);
    const decided: Decided[] = [];
    for (const p of applying) {
      const { ref, object, head } = p.held;
      if (batches.has(ref.kind)) await sendBatches(ref.kind);
      const outcome = p.outcome ?? (await decision(trx, p.handler!, p.ctx!, ref, head.kind, p.effect));
      const first: Decided = { target: ref, object, command: head, outcome };
      decided.push(first, ...(runs ? await this.decideRun(trx, p, first) : []));
    }
    const statements = stepStatements(trx, decided);
    const handOffs = planned.filter((p) => p.handOff).map((p) => this.handOffStatement(p));
    const updates = statements.objectUpdates.map((u) => u.query);
    const heldRefs = [...this.held.values()].map((h) => h.ref);
    const want = statements.woken.filter((w) => !this.held.has(keyOf(w)));
    const room = this.options.only ? 0 : Math.max(0, this.options.maxHeld - this.held.size);
    const notices = decided.map((d) => commandNotice(d.target, d.command.id, d.outcome.status));
    const opening = inTransaction ? [settings(GENERIC_PLANS)] : ['begin', settings(NO_SEQ_SCANS, GENERIC_PLANS), lock];
    const trip = new RoundTrip<'updates' | 'claimed' | 'next' | 'prefetched'>();
    // A step that only looks for work (every object in flight) commits nothing.
    if (planned.length > 0)
      trip
        .add(...opening)
        .read('updates', updates)
        .add(...statements.rest, ...handOffs, 'commit');
    const claim = claimStatement(room, want, heldRefs);
    // The rows of the objects the claim is asked to take first, read after
    // it (a statement of its own: a fresh snapshot, with their locks held),
    // so the objects a step hands itself cost no round trip to adopt. Rows of
    // objects it did not get are ignored.
    const prefetch = room > 0 && want.length > 0 ? objectRowsStatements(want) : [];
    // An object in flight keeps its head and its lock until its call returns.
    const settledRefs = heldRefs.filter((ref) => !this.inFlight.has(keyOf(ref)));
    // The callback deliveries the commit made due get their jobs here, outside it (see dispatchCallbacks.ts).
    const dispatch = planned.length > 0 ? [DISPATCH_CALLBACKS] : [];
    // The notices commit on their own, first: a NOTIFY is delivered when its
    // transaction commits, and waiters need not wait for the claim's work.
    if (notices.length > 0) trip.add(...ASYNCHRONOUS_BEGIN, noticesStatement(notices), 'commit');
    trip
      .add(...ASYNCHRONOUS_BEGIN, ...dispatch)
      .read('claimed', [claim])
      .read('next', [runsStatement(settledRefs)])
      .read('prefetched', prefetch)
      .add('commit');
    const results = await this.send(client, trip);
    recordBatchCommitted(decided, pickedUpAt);
    this.applied += decided.length;

    // The rows the outcomes changed, as they now are.
    const updated = results.get('updates');
    for (const [n, { targets }] of statements.objectUpdates.entries()) {
      const rows = new Map((updated[n]!.rows as ObjectRow[]).map((row) => [row.id, row]));
      for (const target of targets) {
        const row = rows.get(target.id);
        // Fails the lane (its objects are woken again) rather than carrying no row on.
        if (!row) throw new Error(`${target.kind} ${target.id}: its update returned no row`);
        const h = this.held.get(keyOf(target))!;
        recordRowCommitted(h.ref.kind, h.object, row, new Map([[h.blueprint.id, h.blueprint]]));
        h.object = row;
        if (h.ref.kind === 'blueprint') h.blueprint = row as BlueprintRow;
      }
    }
    const claimed = results.one('claimed').rows as CommandRow[];
    const next = new Map<string, CommandRow[]>();
    for (const c of results.one('next').rows as CommandRow[]) {
      const key = keyOf({ kind: c.target_kind, id: c.target_id });
      next.set(key, [...(next.get(key) ?? []), c]);
    }
    for (const [key, h] of this.held) {
      if (this.inFlight.has(key)) continue;
      const [head, ...following] = next.get(key) ?? [];
      if (!head) {
        this.held.delete(key);
        continue;
      }
      h.head = head;
      h.following = following;
    }
    await this.adopt(client, claimed, results.get('prefetched'));
  }

  /** A command this worker cannot run: noted, and left queued until another worker may take it. */
  private handOffStatement(p: Planned): CompiledQuery {
    this.log.warn({ command: p.held.head.id, target: keyOf(p.held.ref) }, p.handOff);
    return CompiledQuery.raw('update commands set message = $2, not_before = now() + make_interval(secs => $3::float8) where id = $1', [
      p.held.head.id,
      p.handOff,
      this.options.handOffAfterMs / 1000,
    ]);
  }

  /** Sends a round trip's statements as one simple query; answers their results by the names they were read under. */
  private async send<Name extends string>(client: pg.PoolClient, trip: RoundTrip<Name>): Promise<RoundTripResults<Name>> {
    let results: pg.QueryResult | pg.QueryResult[];
    try {
      results = await client.query(await simpleQueryText(client, trip.statements));
    } catch (error) {
      throw asVersionConflict(error);
    }
    return trip.results(Array.isArray(results) ? results : [results]);
  }
}

/** Object rows and blueprint rows by key from objectRowsStatements' three results (none: empty). */
function objectRows([leases, resources, blueprints]: Results): { rows: Map<string, ObjectRow>; blueprintRows: Map<number, BlueprintRow> } {
  const keyed = (kind: ObjectKind, result: pg.QueryResult | undefined) =>
    (result?.rows ?? []).map((r) => [keyOf({ kind, id: r.id }), r as ObjectRow] as const);
  return {
    rows: new Map([...keyed('lease', leases), ...keyed('resource', resources), ...keyed('blueprint', blueprints)]),
    blueprintRows: new Map(((blueprints?.rows ?? []) as BlueprintRow[]).map((b) => [b.id, b])),
  };
}

/** Each declared read made once for the step, with every key its objects need. */
async function readAll(db: Db, planned: readonly Planned[]): Promise<void> {
  const byRead = new Map<BatchRead<unknown>, Planned[]>();
  for (const p of planned) {
    const read = batchReadOf(p.handler);
    if (!read || p.outcome) continue;
    byRead.set(read, [...(byRead.get(read) ?? []), p]);
  }
  for (const [read, users] of byRead) {
    const keys = [...new Set(users.map((p) => read.key(p.ctx!)).filter((k): k is number => k !== undefined))];
    const found = keys.length > 0 ? await read.load(db, keys) : new Map<number, unknown>();
    for (const p of users) {
      const key = read.key(p.ctx!);
      (p.ctx as { read: unknown }).read = key === undefined ? undefined : found.get(key);
    }
  }
}

/** The step's locked batches (LockedBatch), each one set of statements for all the heads whose handler declares it, by the kind of object they decide. */
function lockedBatches(applying: readonly Planned[]): Map<ObjectKind, { batch: LockedBatch; statements: readonly CompiledQuery[] }[]> {
  const byBatch = new Map<LockedBatch, Planned[]>();
  for (const p of applying) {
    const batch = lockedBatchOf(p.handler);
    if (!batch || p.outcome) continue;
    byBatch.set(batch, [...(byBatch.get(batch) ?? []), p]);
  }
  const byKind = new Map<ObjectKind, { batch: LockedBatch; statements: readonly CompiledQuery[] }[]>();
  for (const [batch, users] of byBatch) {
    const statements = batch.statements(users.map((p) => p.ctx!));
    if (statements.length === 0) continue;
    const kind = users[0]!.held.ref.kind;
    byKind.set(kind, [...(byKind.get(kind) ?? []), { batch, statements }]);
  }
  return byKind;
}

/** Compiles the statements the lane sends itself. */
const COMPILER = compileOnly('the drain lane compiles statements with this; it runs none');

/**
 * The handler's decision, by its shape: a pure one gets no Db; a querying
 * one the step's transaction; the others that transaction if they declare
 * that they read in it (for this context), else a Db that refuses every
 * query.
 */
function decision(
  trx: Db,
  handler: CommandHandler<ObjectKind>,
  ctx: HandlerContext<ObjectKind>,
  ref: ObjectRef,
  kind: string,
  effect: unknown,
): Promise<Outcome> | Outcome {
  switch (handler.shape) {
    case 'pure':
      return handler.decide(ctx);
    case 'querying':
      return handler.decide(trx, ctx);
    default:
      return handler.decide(readsInTransaction(handler, ctx) ? trx : refusingQueries(ref, kind), ctx, effect);
  }
}

const refusals = new Map<string, Db>();
/** A Db for decisions that declared no reads: any query is a bug in the handler, named here. */
function refusingQueries(ref: ObjectRef, kind: string): Db {
  const name = `${ref.kind}.${kind}`;
  let db = refusals.get(name);
  if (!db) {
    db = compileOnly(`the ${ref.kind} ${kind} handler queried in its decision without declaring readsInTransaction`);
    refusals.set(name, db);
  }
  return db;
}
