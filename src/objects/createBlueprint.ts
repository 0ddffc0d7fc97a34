import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { possibleLabelsColumn, validateDriverSettings } from '../drivers/registry.ts';
import { BlueprintInputSchema, type BlueprintInput } from './blueprintInput.ts';
import { recordEvent } from '../db/recordEvent.ts';

export { BlueprintInputSchema, type BlueprintInput };

/** Creates a blueprint (no command needed: nothing is allocated until a lease asks). */
export async function createBlueprint(db: Db, input: BlueprintInput, actor: Actor): Promise<BlueprintRow> {
  return withTransaction(db, (trx) => createBlueprintInTransaction(trx, input, actor));
}

/** The same, inside a caller's transaction (the API's, which records an Idempotency-Key with it). */
export async function createBlueprintInTransaction(trx: Db, input: BlueprintInput, actor: Actor): Promise<BlueprintRow> {
  const parsed = BlueprintInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid blueprint: ${describeZodIssues(parsed.error.issues)}`);
  const {
    name,
    driver,
    maxResources,
    leasesPerResource,
    minResources,
    idleTimeoutMs,
    checkIntervalMs,
    cleanBetweenLeases,
    cleanAttempts,
    priorityStepMs,
    maxHoldMs,
    fairShareHalfLifeMs,
    preemption,
    labels,
    orphans,
  } = parsed.data;
  // Stored as given, not with the driver's defaults filled in: a default is
  // the code's, applied by each worker as it makes the driver (registry.ts).
  // So a setting a new release adds, with a default, never reaches the
  // workers of the release before it, which would refuse it as unknown in
  // the middle of a rolling upgrade (docs/upgrades.md).
  const checked = validateDriverSettings(driver, parsed.data.settings);
  const settings = parsed.data.settings;
  const row = await trx
    .insertInto('blueprints')
    .values({
      name,
      driver,
      settings: JSON.stringify(settings),
      max_resources: maxResources,
      leases_per_resource: leasesPerResource,
      min_resources: minResources,
      idle_timeout_ms: idleTimeoutMs ?? null,
      check_interval_ms: checkIntervalMs ?? null,
      clean_between_leases: cleanBetweenLeases,
      clean_attempts: cleanAttempts,
      priority_step_ms: priorityStepMs,
      max_hold_ms: maxHoldMs ?? null,
      fair_share_half_life_ms: fairShareHalfLifeMs,
      preemption: preemption === undefined ? null : JSON.stringify(preemption),
      labels: JSON.stringify(labels),
      possible_labels: possibleLabelsColumn(driver, checked),
      orphans,
    })
    .onConflict((oc) => oc.column('name').doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row) throw new CommandRejectedError(`a blueprint named "${name}" already exists`, { field: 'name' });
  await recordEvent(trx, {
    target: { kind: 'blueprint', id: row.id },
    type: 'created',
    toState: row.state,
    message: `created with driver ${driver}, at most ${count(maxResources, 'resource')} of ${count(leasesPerResource, 'slot')}`,
    actor,
    commandId: null,
  });
  return row;
}

/** "1 resource", "2 resources". */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
