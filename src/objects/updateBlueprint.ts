import { sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { canTransition, liveStates, takesLeases, type BlueprintState } from '../domain/lifecycle.ts';
import { lockObjectInTransaction } from '../queue/lockObjectInTransaction.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { findBlueprint, type BlueprintRef } from '../read/blueprints.ts';
import { BlueprintChangesSchema, type BlueprintChanges } from './blueprintInput.ts';
import { recordEvent } from '../db/recordEvent.ts';

export { BlueprintChangesSchema, type BlueprintChanges };

/** The column each changeable field is stored in. */
const COLUMNS = {
  maxResources: 'max_resources',
  leasesPerResource: 'leases_per_resource',
  checkIntervalMs: 'check_interval_ms',
  cleanBetweenLeases: 'clean_between_leases',
  cleanAttempts: 'clean_attempts',
  priorityStepMs: 'priority_step_ms',
  maxHoldMs: 'max_hold_ms',
  fairShareHalfLifeMs: 'fair_share_half_life_ms',
  preemption: 'preemption',
  labels: 'labels',
  orphans: 'orphans',
} as const;

/**
 * Changes a blueprint's settings, in the caller's transaction, as the
 * blueprint's single writer for that moment (see lockObjectInTransaction).
 * The version goes up, so a drain that read the old row cannot commit on it.
 */
export async function updateBlueprint(trx: Db, ref: BlueprintRef, changes: BlueprintChanges, actor: Actor): Promise<BlueprintRow> {
  const parsed = BlueprintChangesSchema.safeParse(changes);
  if (!parsed.success) throw new InvalidInputError(`invalid blueprint changes: ${describeZodIssues(parsed.error.issues)}`);
  const blueprint = await lockedBlueprint(trx, ref);
  if (!liveStates('blueprint').includes(blueprint.state)) {
    throw new CommandRejectedError(`blueprint ${blueprint.name} is ${blueprint.state}: it is kept for its history and changes no more`, {
      state: blueprint.state,
    });
  }
  const fields = Object.entries(parsed.data).filter(([, value]) => value !== undefined) as Array<
    [keyof typeof COLUMNS, number | boolean | string | null | object]
  >;
  // Labels and the preemption settings are objects: written and told as JSON.
  const isObject = (value: unknown) => typeof value === 'object' && value !== null;
  const text = (value: unknown) => (isObject(value) ? JSON.stringify(value) : String(value));
  const change = `changed ${fields.map(([field, value]) => `${field} ${text(blueprint[COLUMNS[field]])} → ${text(value)}`).join(', ')}`;
  const columns = Object.fromEntries(fields.map(([field, value]) => [COLUMNS[field], isObject(value) ? JSON.stringify(value) : value]));
  const row = await writeBlueprint(trx, blueprint, columns, actor, change);
  await recordEvent(trx, {
    target: { kind: 'blueprint', id: row.id },
    type: 'updated',
    message: change,
    actor,
    commandId: null,
    data: parsed.data,
  });
  return row;
}

/**
 * Disables a blueprint (it takes no new leases; those it has carry on),
 * enables it again, or archives it once nothing of it is live.
 */
export async function setBlueprintState(trx: Db, ref: BlueprintRef, to: BlueprintState, actor: Actor): Promise<BlueprintRow> {
  const blueprint = await lockedBlueprint(trx, ref);
  if (!canTransition('blueprint', blueprint.state, to)) {
    const why = blueprint.state === to ? `already ${to}` : `${blueprint.state}, so it cannot become ${to}`;
    throw new CommandRejectedError(`blueprint ${blueprint.name} is ${why}`, { state: blueprint.state });
  }
  if (!liveStates('blueprint').includes(to)) await assertNothingLive(trx, blueprint);
  const row = await writeBlueprint(trx, blueprint, { state: to }, actor, to);
  await recordEvent(trx, {
    target: { kind: 'blueprint', id: row.id },
    type: 'state',
    fromState: blueprint.state,
    toState: to,
    message: takesLeases('blueprint', to) ? to : `${to}: no new leases`,
    actor,
    commandId: null,
  });
  return row;
}

/**
 * A blueprint leaves the lists for good only once nothing of it is live: a
 * lease or resource that still names it must stay reachable from it. The
 * blueprint's lock is held, so no lease joins it meanwhile (new leases
 * need it to take leases, and it is being archived from a state that does
 * not, or about to be).
 */
async function assertNothingLive(trx: Db, blueprint: BlueprintRow): Promise<void> {
  const live = (table: 'leases' | 'resources', kind: 'lease' | 'resource') =>
    trx
      .selectFrom(table)
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', blueprint.id)
      .where('state', 'in', liveStates(kind))
      .executeTakeFirstOrThrow();
  const leases = await live('leases', 'lease');
  const resources = await live('resources', 'resource');
  if (leases.n > 0 || resources.n > 0) {
    throw new CommandRejectedError(
      `blueprint ${blueprint.name} still has ${leases.n} live lease(s) and ${resources.n} live resource(s): disable it, release them (\`slipway lease release\`, \`slipway resource release\`), and archive it once they are destroyed`,
      { state: blueprint.state, liveLeases: leases.n, liveResources: resources.n },
    );
  }
}

async function lockedBlueprint(trx: Db, ref: BlueprintRef): Promise<BlueprintRow> {
  const { id } = await findBlueprint(trx, ref);
  await lockObjectInTransaction(trx, { kind: 'blueprint', id });
  return findBlueprint(trx, id);
}

async function writeBlueprint(
  trx: Db,
  blueprint: BlueprintRow,
  set: { max_resources?: number; leases_per_resource?: number; state?: string },
  actor: Actor,
  change: string,
): Promise<BlueprintRow> {
  const row = await trx
    .updateTable('blueprints')
    .set({ ...set, version: sql<number>`version + 1`, updated_at: sql<Date>`now()` })
    .where('id', '=', blueprint.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // Whatever changed may have made room (a raised limit, an enable): the
  // blueprint's drain serves its waiting leases from it. A command, not a
  // bare wake-up: a drain with nothing queued does nothing.
  await appendInTransaction(
    trx,
    { target: { kind: 'blueprint', id: blueprint.id }, kind: 'serve_waiters', actor: { ...actor, reason: change } },
    { fromOutside: false },
  );
  return row;
}
