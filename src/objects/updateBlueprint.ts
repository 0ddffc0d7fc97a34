import { sql } from 'kysely';
import { z } from 'zod';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { canTransition, type BlueprintState } from '../domain/lifecycle.ts';
import { lockObjectInTransaction } from '../queue/lockObjectInTransaction.ts';
import { wakeObjects } from '../queue/wakeObjects.ts';
import { findBlueprint, type BlueprintRef } from '../read/blueprints.ts';
import { BlueprintInputSchema } from './createBlueprint.ts';
import { recordEvent } from './recordEvent.ts';

/**
 * What may change on a blueprint directly: its limits. A new
 * `leasesPerResource` applies to resources made from then on; a lower
 * `maxResources` stops new resources until the count is below it.
 *
 * Driver settings are not among them: new settings may leave live resources
 * that no longer fit (a static pool's entries), so they change only through
 * the blueprint's own queue (`update_settings`), whose drain reconciles the
 * resources with them. The key is named here only to say so.
 */
const { maxResources, leasesPerResource } = BlueprintInputSchema.shape;
export const BlueprintChangesSchema = z
  .object({
    // Without the defaults creation fills in: a field left out stays as it is.
    maxResources: maxResources.optional(),
    leasesPerResource: leasesPerResource.unwrap().optional(),
    settings: z
      .undefined({
        error: 'driver settings change through the update_settings command (POST /v1/blueprints/{id}/commands, or slipway blueprint update), which reconciles the resources with them',
      })
      .optional(),
  })
  .strict()
  .refine((changes) => Object.keys(changes).length > 0, 'name at least one of maxResources, leasesPerResource');
export type BlueprintChanges = z.input<typeof BlueprintChangesSchema>;

/**
 * Changes a blueprint's settings, in the caller's transaction, as the
 * blueprint's single writer for that moment (see lockObjectInTransaction).
 * The version goes up, so a drain that read the old row cannot commit on it.
 */
export async function updateBlueprint(trx: Db, ref: BlueprintRef, changes: BlueprintChanges, actor: Actor): Promise<BlueprintRow> {
  const parsed = BlueprintChangesSchema.safeParse(changes);
  if (!parsed.success) throw new InvalidInputError(`invalid blueprint changes: ${describeZodIssues(parsed.error.issues)}`);
  const blueprint = await lockedBlueprint(trx, ref);
  const { maxResources, leasesPerResource } = parsed.data;
  const row = await writeBlueprint(trx, blueprint, {
    ...(maxResources !== undefined ? { max_resources: maxResources } : {}),
    ...(leasesPerResource !== undefined ? { leases_per_resource: leasesPerResource } : {}),
  });
  await recordEvent(trx, {
    target: { kind: 'blueprint', id: row.id },
    type: 'updated',
    message: `changed ${Object.keys(parsed.data).join(', ')}`,
    actor,
    commandId: null,
    data: parsed.data,
  });
  return row;
}

/** Disables a blueprint (it takes no new leases; those it has carry on) or enables it again. */
export async function setBlueprintState(trx: Db, ref: BlueprintRef, to: BlueprintState, actor: Actor): Promise<BlueprintRow> {
  const blueprint = await lockedBlueprint(trx, ref);
  if (!canTransition('blueprint', blueprint.state, to)) {
    throw new CommandRejectedError(`blueprint ${blueprint.name} is already ${blueprint.state}`, { state: blueprint.state });
  }
  const row = await writeBlueprint(trx, blueprint, { state: to });
  await recordEvent(trx, {
    target: { kind: 'blueprint', id: row.id },
    type: 'state',
    fromState: blueprint.state,
    toState: to,
    message: to === 'disabled' ? 'disabled: no new leases' : 'enabled',
    actor,
    commandId: null,
  });
  return row;
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
): Promise<BlueprintRow> {
  const row = await trx
    .updateTable('blueprints')
    .set({ ...set, version: sql<number>`version + 1`, updated_at: sql<Date>`now()` })
    .where('id', '=', blueprint.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  // A drain that found the lock taken gave up: look at the queue again.
  await wakeObjects(trx, [{ kind: 'blueprint', id: blueprint.id }]);
  return row;
}
