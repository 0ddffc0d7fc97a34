import { setTimeout as sleep } from 'node:timers/promises';
import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Database } from '../db/Database.ts';
import { compileOnly } from '../db/compileOnly.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import { simpleQueryText } from '../db/preparedText.ts';
import { PermanentDriverError, TransientDriverError } from '../drivers/Driver.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import type { Logger } from '../log.ts';
import { recordBatchCommitted, recordRowCommitted } from '../metrics/metrics.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { wakeObjectsQuery } from '../queue/wakeObjects.ts';
import { type CommittingLane, commitWithRetries } from './committer.ts';
import { asVersionConflict, type StepStatements, stepStatements } from './commitOutcome.ts';
import { commitTrip } from './commitTrip.ts';
import { type DecidingLane, decideStep } from './decideStep.ts';
import { driverFailure } from './driverFailure.ts';
import { hasEffect } from './Handler.ts';
import { type Held, keyOf, type ObjectRow, type Planned, type Results } from './laneTypes.ts';
import { type PlanningParts, planHead, readDeclared } from './planCommands.ts';
import { RoundTrip, type RoundTripResults } from './roundTrip.ts';
import { RunningMarks } from './runningMarks.ts';
import { claimStatement } from './sql/claim.ts';
import { ASYNCHRONOUS_BEGIN } from './sql/laneTransactions.ts';
import { objectRowsStatements } from './sql/objectRows.ts';

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
 * One connection's share of a worker's drains: it holds the advisory locks of
 * up to `maxHeld` objects of any kind and applies their commands in steps,
 * a command per object per step, or a run of them: after the head, the
 * object's next ready commands (up to RUN_LENGTH) are decided one after
 * another on the row as the one before left it, for as long as their
 * handlers allow (`inRuns`, commandRun.ts), and committed together. A lone
 * object is a batch of one.
 *
 * A step, in round trips, each part in a module of its own:
 * 1. each held object's head planned from the state table (planCommands.ts),
 *    and the declared reads of the step's handlers, one statement per read
 *    for all of them (BatchRead), if any handler declares one;
 * 2. every effect at once, with no transaction open, on other connections
 *    of the pool; the step waits EFFECT_JOIN_MS for them, and a call still
 *    running then is left in flight, its command marked running
 *    (RunningMarks): its object joins a later step, the one after its call
 *    returns;
 * 3. the decisions (decideStep.ts): if one queries under row locks (a
 *    `querying` handler's, or one whose `readsInTransaction` says so, see
 *    Handler.ts), `begin` and the rows locked and version-checked, with the
 *    statements the step's decisions share (LockedBatch) in the same round
 *    trip, then those decisions' own queries;
 * 4. ONE round trip (commitTrip.ts), tried again or split by the committer
 *    (committer.ts), that commits every outcome (sql/lockVersions.ts first,
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
  /** What the contexts of the commands it plans and decides are given. */
  private readonly planning: PlanningParts;

  /**
   * `database`: the pool the lane takes its connection from, and its Kysely,
   * through which effects query (never the lane's connection: a call in
   * flight may outlive its step).
   */
  constructor(
    database: Pick<Database, 'pool' | 'db'>,
    drivers: DriverRegistry,
    private readonly log: Logger,
    private readonly options: LaneOptions,
  ) {
    this.pool = database.pool;
    this.marksPool = options.marksPool ?? database.pool;
    this.planning = { drivers, db: database.db };
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
    const fresh = finishing
      ? []
      : [...this.held.values()].filter((h) => !this.inFlight.has(keyOf(h.ref))).map((h) => planHead(this.planning, h, marks));
    await readDeclared(kyselyOnClient(client), fresh);
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
    const step = await decideStep(this.deciding(client), planned, runs);
    const statements = stepStatements(COMPILER, step.decided);
    const held = [...this.held.values()].map((h) => h.ref);
    const trip = commitTrip({
      step,
      statements,
      handOffs: planned.filter((p) => p.handOff).map((p) => this.handOffStatement(p)),
      commits: planned.length > 0,
      room: this.options.only ? 0 : Math.max(0, this.options.maxHeld - this.held.size),
      wanted: statements.woken.filter((w) => !this.held.has(keyOf(w))),
      held,
      settled: held.filter((ref) => !this.inFlight.has(keyOf(ref))),
    });
    const results = await this.send(client, trip);
    recordBatchCommitted(step.decided, pickedUpAt, (ref) => this.held.get(keyOf(ref))?.blueprint);
    this.applied += step.decided.length;
    this.carryUpdatedRows(statements, results.get('updates'));
    this.takeNextCommands(results.one('next').rows as CommandRow[]);
    await this.adopt(client, results.one('claimed').rows as CommandRow[], results.get('prefetched'));
  }

  /** What deciding a step (decideStep.ts) needs of the lane. */
  private deciding(client: pg.PoolClient): DecidingLane {
    return {
      ...this.planning,
      client,
      newMarks: () => new RunningMarks(this.marksPool, this.log),
      send: (trip) => this.send(client, trip),
    };
  }

  /** The rows the outcomes changed, as the commit returned them: the lane carries them to the objects' next commands. */
  private carryUpdatedRows(statements: StepStatements, updated: Results): void {
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
  }

  /** Each settled object's next ready commands (sql/runs.ts); one with none is let go, its lock freed by the claim. */
  private takeNextCommands(commands: readonly CommandRow[]): void {
    const next = new Map<string, CommandRow[]>();
    for (const c of commands) {
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

/** Compiles the statements the lane sends itself. */
const COMPILER = compileOnly('the drain lane compiles statements with this; it runs none');
