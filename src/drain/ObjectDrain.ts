import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import { commandKindSpec, preemptingKinds } from '../domain/commandKinds.ts';
import { describeZodIssues } from '../domain/errors.ts';
import { accepts, canTransition } from '../domain/lifecycle.ts';
import { PermanentDriverError, TransientDriverError } from '../drivers/Driver.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import type { Logger } from '../log.ts';
import type { ObjectRef } from '../queue/objectTables.ts';
import { wakeObjects } from '../queue/wakeObjects.ts';
import { outcomeStatements } from './commitOutcome.ts';
import { PendingAnnouncements } from './sql/announcements.ts';
import type { HandlerContext, HandlerTable, ObjectTypes, Outcome } from './Handler.ts';
import { BLUEPRINT_HANDLERS } from './handlers/blueprintHandlers.ts';
import { LEASE_HANDLERS } from './handlers/leaseHandlers.ts';
import { RESOURCE_HANDLERS } from './handlers/resourceHandlers.ts';
import { unlockObject } from './sql/objectLock.ts';
import { beginLockingObjectRow, expectVersion } from './sql/objectRow.ts';
import { announceUnlockAndLook, commitOutcomeAndReadHead, lockAndReadHead, markRunning } from './sql/queueHead.ts';

// Each table is checked against its own object kind where it is defined;
// here they are looked up by the kind of the object being drained.
const HANDLERS = {
  lease: LEASE_HANDLERS,
  resource: RESOURCE_HANDLERS,
  blueprint: BLUEPRINT_HANDLERS,
} as unknown as Record<ObjectKind, HandlerTable<ObjectKind>>;

const PREEMPTING: Record<ObjectKind, string[]> = {
  lease: preemptingKinds('lease'),
  resource: preemptingKinds('resource'),
  blueprint: preemptingKinds('blueprint'),
};

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
}

/** Retry delay after the n-th transient failure: 0.5 s doubling, capped at a minute. */
export function backoffMs(attempts: number): number {
  return Math.min(500 * 2 ** attempts, 60_000);
}

/**
 * Drains one object's command queue. The whole protocol lives here:
 *
 * 1. On a dedicated connection, take the object's session advisory lock, or
 *    return at once if another worker holds it (that worker re-checks the
 *    queue after it lets go, so nothing appended meanwhile is stranded).
 * 2. Loop: read the queue head; if it calls a driver, mark it running and
 *    call out with no transaction open; then in ONE short transaction commit
 *    the object's new state (version-checked), the command's outcome, the
 *    events and the follow-ups.
 * 3. When nothing is ready, let go of the lock and look once more; if only
 *    a yielded command is left, schedule a wake-up for when it is due.
 *
 * Round trips are what a drain costs on a busy server, so the statements
 * that can go together do (see sql/queueHead.ts): the commit with the next
 * queue head, the notices with the unlock and the last look.
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
    const announcements = new PendingAnnouncements();
    let failure: Error | undefined;
    try {
      let applied = 0;
      for (;;) {
        const start = await lockAndReadHead<ObjectRow>(client, target, PREEMPTING[kind]);
        if (!start.locked) return applied;
        let after: Awaited<ReturnType<typeof announceUnlockAndLook>>;
        try {
          const held = await this.drainLocked(client, target, start, announcements);
          applied += held.applied;
          after = await announceUnlockAndLook(client, target, announcements, held.openTransaction);
        } catch (error) {
          // The connection is discarded below, which frees the lock anyway.
          await unlockObject(client, kind, id).catch(() => undefined);
          throw error;
        }
        if (after.ready) continue;
        // A yielded command: look again when it is due.
        if (after.nextNotBefore) await wakeObjects(kyselyOnClient(client), [target], after.nextNotBefore);
        return applied;
      }
    } catch (error) {
      failure = error as Error;
      throw error;
    } finally {
      // A connection that failed mid-transaction is discarded, never reused.
      client.release(failure);
    }
  }

  /**
   * Applies ready commands while holding the lock, starting in the outcome
   * transaction the lock opened. The object's row is read once, with the
   * lock, its row lock and the first queue head, and then carried forward
   * from each commit's RETURNING: only the lock holder writes it, and every
   * commit re-checks its version under a row lock, so the copy is the row.
   * Returns how many it applied, and whether the last commit left an
   * outcome transaction open for the caller to end.
   */
  private async drainLocked(
    client: pg.PoolClient,
    target: ObjectRef,
    first: { head: CommandRow | undefined; object: ObjectRow | undefined; blueprint: BlueprintRow | undefined },
    announcements: PendingAnnouncements,
  ): Promise<{ applied: number; openTransaction: boolean }> {
    const blueprints = new Map(first.blueprint ? [[first.blueprint.id, first.blueprint]] : []);
    const step = { client, db: kyselyOnClient(client), target, blueprints, announcements, openTransaction: true };
    let { head } = first;
    if (head && !first.object) throw new Error(`${target.kind} ${target.id} has commands but no row`);
    let object = first.object!;
    let applied = 0;
    while (head) {
      const after = await this.apply(step, object, head);
      if (!after) break;
      ({ object, head } = after);
      applied++;
    }
    return { applied, openTransaction: step.openTransaction };
  }

  /**
   * Applies one command; returns the object's row after it and the next
   * queue head, or undefined when this worker cannot run the command and
   * must hand the object on.
   *
   * Each commit opens the next command's outcome transaction, the object's
   * row already locked (see commitOutcomeAndReadHead), so a command that
   * calls no driver decides and commits in that one and costs a single round
   * trip of its own. A driver call first ends it (markRunning), and the
   * transaction is opened again after the call.
   */
  private async apply(step: DrainStep, object: ObjectRow, command: CommandRow): Promise<{ object: ObjectRow; head: CommandRow | undefined } | undefined> {
    const { client, db, target } = step;
    const spec = commandKindSpec(target.kind, command.kind);
    const schema = spec?.versions[command.version];
    if (!spec || !schema) {
      // Written by a newer Slipway: leave it queued and untouched (but for a
      // note saying why), and let a worker that knows it take the object.
      const note = `waiting for a worker that handles ${target.kind} ${command.kind} v${command.version}`;
      await db
        .updateTable('commands')
        .set({ message: note, not_before: new Date(Date.now() + this.options.handOffAfterMs) })
        .where('id', '=', command.id)
        .execute();
      if (step.openTransaction) await client.query('commit');
      step.openTransaction = false;
      this.log.warn({ command: command.id, target: `${target.kind}:${target.id}` }, note);
      return undefined;
    }

    if (this.options.chaosDelayMs > 0) await sleep(Math.random() * this.options.chaosDelayMs);

    let outcome: Outcome | undefined;
    const payload = schema.safeParse(command.payload);
    const handler = HANDLERS[target.kind][command.kind];
    if (!payload.success) {
      outcome = { status: 'failed', message: `invalid payload: ${describeZodIssues(payload.error.issues, 'payload')}` };
    } else if (!accepts(target.kind, object.state, command.kind) || !handler) {
      outcome = { status: 'done', message: `nothing to do: ${target.kind} ${target.id} is ${object.state}` };
    }

    let ctx: HandlerContext<ObjectKind> | undefined;
    let effect: unknown;
    if (!outcome && handler) {
      ctx = await this.context(step, object, command, payload.data);
      if (handler.effect) {
        try {
          effect = await handler.effect(ctx);
        } catch (error) {
          outcome = driverFailure(target.kind, object.state, command, error as Error);
          this.log.warn({ err: error, command: command.id, kind: command.kind, target: `${target.kind}:${target.id}` }, 'driver call failed');
        }
      }
    }

    const settled = outcome;
    for (let attempt = 1; ; attempt++) {
      try {
        if (!step.openTransaction) await beginLockingObjectRow(client, target, object.version);
        step.openTransaction = true;
        // A decision reads and writes only through this transaction, so it
        // can be taken again after a rollback.
        outcome = settled ?? (await handler!.decide(db, ctx!, effect));
        const next = await commitOutcomeAndReadHead<ObjectRow>(
          client,
          target,
          PREEMPTING[target.kind],
          outcomeStatements(db, target, object, command, outcome),
        );
        const carried = next.object ?? object;
        expectVersion(target, next.locked, carried.version);
        step.announcements.add(target, command.id, outcome.status);
        this.log.debug({ command: command.id, kind: command.kind, status: outcome.status, to: outcome.to }, outcome.message);
        return { object: carried, head: next.head };
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
      driver: () => validatingDriver(drivers.forBlueprint(blueprint), markOnce),
      call: {
        blueprint: { id: blueprint.id, name: blueprint.name, settings: blueprint.settings },
        idempotencyKey: `${target.kind}:${target.id}:${command.id}`,
        commandId: command.id,
      },
    };
  }
}

/** What one lock hold's commands share: its connection, its object, the blueprints it read, its held notices, its open transaction. */
interface DrainStep {
  readonly client: pg.PoolClient;
  readonly db: Db;
  readonly target: ObjectRef;
  readonly blueprints: Map<number, BlueprintRow>;
  readonly announcements: PendingAnnouncements;
  /** Whether an outcome transaction is open, the object's row locked in it (see commitOutcomeAndReadHead). */
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
