import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import { canTransition } from '../domain/lifecycle.ts';
import { PermanentDriverError, TransientDriverError } from '../drivers/Driver.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import type { Logger } from '../log.ts';
import { recordCommitted, recordRowCommitted } from '../metrics/metrics.ts';
import type { ObjectRef } from '../queue/objectTables.ts';
import { outcomeStatements } from './commitOutcome.ts';
import { PendingAnnouncements } from './sql/announcements.ts';
import { commandStep, driverCall, PREEMPTING } from './commandStep.ts';
import type { HandlerContext, ObjectTypes, Outcome } from './Handler.ts';
import { beginLockingObjectRow } from './sql/objectRow.ts';
import { commitOutcomeAndContinue, handOffAndContinue, type HoldStep, markRunning, startHold } from './sql/queueHead.ts';

/**
 * How often one command's commit is tried when PostgreSQL aborts it to break
 * a deadlock (40P01) or a serialization failure (40001). Such a conflict
 * means only that two commits crossed (see wakeObjects); trying again at once
 * is the remedy PostgreSQL's manual gives. Anything else is a real failure.
 */
const COMMIT_ATTEMPTS = 5;
const isRetryableConflict = (error: unknown) => ['40P01', '40001'].includes((error as { code?: string }).code ?? '');

export interface DrainOptions {
  /** Upper bound of a random pause before each command (chaos testing). */
  readonly chaosDelayMs: number;
  /** How long a command this worker cannot run waits before another worker is tried. */
  readonly handOffAfterMs: number;
  /** Aborted when the worker stops: a hold ends after the command in progress. */
  readonly stopping?: AbortSignal;
}

/** Retry delay after the n-th transient failure: 0.5 s doubling, capped at a minute. */
export function backoffMs(attempts: number): number {
  return Math.min(500 * 2 ** attempts, 60_000);
}

/**
 * Drains one object's command queue. The whole protocol lives here:
 *
 * 1. On a dedicated connection, take the object's session advisory lock, or
 *    return at once if another worker holds it (that worker looks at the
 *    queue again as it lets go, so nothing appended meanwhile is stranded).
 *    Session-level, not transaction-level, so it spans the several short
 *    transactions and the driver calls of one hold; if the worker dies,
 *    PostgreSQL ends the session and frees the lock.
 * 2. Loop: take the queue head; if it calls a driver, mark it running and
 *    call out with no transaction open; then in ONE short transaction commit
 *    the object's new state (version-checked), the command's outcome, the
 *    events and the follow-ups.
 * 3. When nothing is ready, let go of the lock and look once more; wake the
 *    object for anything found then, or for a yielded command when it is due.
 *
 * Round trips are what a drain costs on a busy server, so the statements
 * that can go together do (see sql/queueHead.ts): the lock with the first
 * reads; each outcome with its transaction's opening, its commit and the
 * next head, or, when there is none, the unlock, the last look and the
 * notices. A pending lease's release (release, then destroy) is three.
 *
 * Leases come here from DrainBatcher, which drains many at once in the same
 * protocol as long as their commands need no I/O, and hands a lease over
 * when one does; resources and blueprints come straight here.
 */
export class ObjectDrain {
  constructor(
    private readonly pool: pg.Pool,
    private readonly drivers: DriverRegistry,
    private readonly log: Logger,
    private readonly options: DrainOptions,
  ) {}

  async drain(kind: ObjectKind, id: number): Promise<number> {
    const target = { kind, id };
    const client = await this.pool.connect();
    let failure: Error | undefined;
    try {
      const start = await startHold<ObjectRow>(client, target, PREEMPTING[kind]);
      if (!start.head) return 0;
      const { applied, holding } = await this.drainLocked(client, target, start);
      // Cut short by a stopping worker, the hold still has the lock: ending
      // the session gives it back, and another worker's sweeper wakes the
      // object, whose commands are queued with nobody holding it.
      if (holding) failure = new Error('worker stopping: hold given up with commands still queued');
      return applied;
    } catch (error) {
      failure = error as Error;
      throw error;
    } finally {
      // A connection that failed is discarded, never reused: its session
      // ends, which ends any transaction and frees the advisory lock (as
      // when a worker dies), so a failure needs no unlock of its own.
      client.release(failure);
    }
  }

  /**
   * Applies ready commands while holding the lock, until the hold ends (the
   * last round trip gave the lock back). The object's row is read once, with
   * the lock, and then carried forward from each commit's RETURNING: only
   * the lock holder writes it, and every outcome transaction re-checks its
   * version under a row lock, so the copy is the row. Returns how many
   * commands it applied, and whether it stopped with the lock still held (the
   * worker is stopping).
   */
  private async drainLocked(
    client: pg.PoolClient,
    target: ObjectRef,
    first: { head: CommandRow | undefined; object: ObjectRow | undefined; blueprint: BlueprintRow | undefined },
  ): Promise<{ applied: number; holding: boolean }> {
    if (!first.object) throw new Error(`${target.kind} ${target.id} has commands but no row`);
    const step: DrainStep = {
      client,
      db: kyselyOnClient(client, () => this.openTransaction(step)),
      target,
      blueprints: new Map(first.blueprint ? [[first.blueprint.id, first.blueprint]] : []),
      announcements: new PendingAnnouncements(),
      object: first.object,
      openTransaction: false,
    };
    let head = first.head;
    let applied = 0;
    while (head) {
      if (this.options.stopping?.aborted) return { applied, holding: true };
      const { object, head: next, didApply } = await this.apply(step, head);
      if (object) step.object = object;
      head = next;
      if (didApply) applied++;
    }
    return { applied, holding: false };
  }

  /**
   * Opens the outcome transaction, the object's row locked, when the
   * decision makes its first query (see beginLockingObjectRow); a decision
   * that makes none leaves it to the commit's own round trip.
   */
  private async openTransaction(step: DrainStep): Promise<void> {
    if (step.openTransaction) return;
    step.openTransaction = true;
    await beginLockingObjectRow(step.client, step.target, step.object.version);
  }

  /**
   * Applies one command; returns the object's row after it, if the outcome
   * wrote it, and the next ready command, if the hold goes on. A command
   * this worker cannot run is handed on untouched instead (didApply false).
   */
  private async apply(step: DrainStep, command: CommandRow): Promise<HoldStep<ObjectRow> & { didApply: boolean }> {
    const { client, db, target } = step;
    const object = step.object;
    const pickedUpAt = Date.now();
    const decided = commandStep(target, object.state, command);
    if (decided.step === 'unknown') {
      // Written by a newer Slipway: leave it queued and untouched (but for a
      // note saying why), and let a worker that knows it take the object.
      this.log.warn({ command: command.id, target: `${target.kind}:${target.id}` }, decided.note);
      const handOff = db
        .updateTable('commands')
        .set({ message: decided.note, not_before: new Date(Date.now() + this.options.handOffAfterMs) })
        .where('id', '=', command.id)
        .compile();
      const next = await handOffAndContinue<ObjectRow>(client, target, PREEMPTING[target.kind], [handOff], step.announcements);
      return { ...next, didApply: false };
    }

    if (this.options.chaosDelayMs > 0) await sleep(Math.random() * this.options.chaosDelayMs);

    let outcome: Outcome | undefined = decided.step === 'settled' ? decided.outcome : undefined;
    const handler = decided.step === 'handle' ? decided.handler : undefined;
    let ctx: HandlerContext<ObjectKind> | undefined;
    let effect: unknown;
    if (decided.step === 'handle') {
      ctx = await this.context(step, object, command, decided.payload);
      if (decided.handler.effect) {
        try {
          effect = await decided.handler.effect(ctx);
        } catch (error) {
          outcome = driverFailure(target.kind, object.state, command, error as Error);
          this.log.warn({ err: error, command: command.id, kind: command.kind, target: `${target.kind}:${target.id}` }, 'driver call failed');
        }
      }
    }

    const settled = outcome;
    for (let attempt = 1; ; attempt++) {
      try {
        // A decision reads and writes only through this transaction, so it
        // can be taken again after a rollback.
        outcome = settled ?? (await handler!.decide(db, ctx!, effect));
        const next = await commitOutcomeAndContinue<ObjectRow>(
          client,
          target,
          PREEMPTING[target.kind],
          { open: step.openTransaction, version: object.version },
          outcomeStatements(db, target, object, command, outcome),
          step.announcements,
          PendingAnnouncements.notice(target, command.id, outcome.status),
        );
        step.openTransaction = false;
        recordCommitted(command, outcome, pickedUpAt);
        recordRowCommitted(target.kind, object, next.object, step.blueprints);
        this.log.debug({ command: command.id, kind: command.kind, status: outcome.status, to: outcome.to }, outcome.message);
        return { ...next, didApply: true };
      } catch (error) {
        step.openTransaction = false;
        await client.query('rollback').catch(() => undefined);
        if (attempt >= COMMIT_ATTEMPTS || !isRetryableConflict(error)) throw error;
        this.log.info({ attempt, code: (error as { code?: string }).code, command: command.id }, 'commit lost a deadlock; retrying');
      }
    }
  }

  private async context(step: DrainStep, object: ObjectRow, command: CommandRow, payload: unknown): Promise<HandlerContext<ObjectKind>> {
    const { client, db, target, blueprints } = step;
    const blueprintId = target.kind === 'blueprint' ? target.id : (object as { blueprint_id: number }).blueprint_id;
    // A lease's or resource's blueprint is read once per drain, not per
    // command: a settings change applies from the next drain on.
    let blueprint = target.kind === 'blueprint' ? (object as BlueprintRow) : blueprints.get(blueprintId);
    if (!blueprint) {
      blueprint = await db.selectFrom('blueprints').selectAll().where('id', '=', blueprintId).executeTakeFirstOrThrow();
      blueprints.set(blueprintId, blueprint);
    }
    const drivers = this.drivers;
    let marked = false;
    const markOnce = async () => {
      if (marked) return;
      marked = true;
      // No transaction may stay open across a driver call.
      await markRunning(client, command.id, step.announcements, step.openTransaction);
      step.openTransaction = false;
    };
    return {
      object,
      command,
      payload,
      blueprint,
      db,
      // Marked running as the driver call goes out, so a crash mid-call shows
      // (and the call is repeated); commands that call nothing skip the write.
      driver: () => validatingDriver(drivers.forBlueprint(blueprint), markOnce, blueprint.driver),
      call: driverCall(target, command, blueprint),
    };
  }
}

/** What one lock hold's commands share: its connection, its object, the blueprints it read, its held notices, its open transaction. */
interface DrainStep {
  readonly client: pg.PoolClient;
  /** Queries on the drain's connection, opening the outcome transaction first (see openTransaction). */
  readonly db: Db;
  readonly target: ObjectRef;
  readonly blueprints: Map<number, BlueprintRow>;
  readonly announcements: PendingAnnouncements;
  /** The object's row as the last commit left it. */
  object: ObjectRow;
  /** Whether an outcome transaction is open, the object's row locked in it. */
  openTransaction: boolean;
}

type ObjectRow = ObjectTypes[ObjectKind]['row'];


/**
 * A driver call failed. Transient (or unknown) errors leave the command
 * queued to retry with backoff; a permanent one breaks the object, which is
 * then destroyed.
 */
function driverFailure(kind: ObjectKind, state: string, command: CommandRow, error: Error): Outcome {
  if (error instanceof PermanentDriverError) {
    const breaks = canTransition(kind, state, 'broken');
    return {
      status: 'failed',
      message: `driver failed permanently: ${error.message}`,
      ...(breaks
        ? {
            to: 'broken',
            set: { message: error.message },
            followUps: [{ target: { kind, id: command.target_id }, kind: 'destroy', reason: `broken: ${error.message}` }],
          }
        : {}),
    };
  }
  const retryInMs = error instanceof TransientDriverError && error.retryAfterMs ? error.retryAfterMs : backoffMs(command.attempts);
  return {
    status: 'yield',
    message: `driver error (attempt ${command.attempts + 1}), retrying in ${(retryInMs / 1000).toFixed(1)} s: ${error.message}`,
    retryInMs,
    events: [{ type: 'driver_error', message: error.message, data: { attempt: command.attempts + 1, retryInMs } }],
  };
}
