import { z } from 'zod';
import { LabelsSchema } from '../domain/labels.ts';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { validateDriverSettings } from '../drivers/registry.ts';
import { recordEvent } from './recordEvent.ts';

export const BlueprintInputSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'use 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit'),
    driver: z.string().min(1),
    settings: z.record(z.string(), z.unknown()).default({}),
    maxResources: z.number().int().min(1).max(100_000),
    leasesPerResource: z.number().int().min(1).max(10_000).default(1),
    /** The warm minimum: active resources the collector keeps ready. */
    minResources: z.number().int().min(0).max(100_000).default(0),
    /** Idle resources beyond the minimum are reclaimed after this long; absent: kept. */
    idleTimeoutMs: z
      .number()
      .int()
      .min(1000, 'expected at least 1 s')
      .max(366 * 24 * 3600 * 1000)
      .optional(),
    /** How often the collector asks each resource to be checked by its driver; absent: never. */
    checkIntervalMs: z
      .number()
      .int()
      .min(1000, 'expected at least 1 s')
      .max(366 * 24 * 3600 * 1000)
      .optional(),
    /** Each slot a lease gives back is cleaned by the driver before another lease may have it. */
    cleanBetweenLeases: z.boolean().default(false),
    /** Failed cleanings in a row that quarantine a resource. */
    cleanAttempts: z.number().int().min(1).max(100).default(3),
    /** How much waiting one level of a lease's priority is worth in the line (0: priorities do not count). */
    priorityStepMs: z
      .number()
      .int()
      .min(0)
      .max(24 * 3600 * 1000, 'expected at most a day')
      .default(60_000),
    /** Labels every resource of it carries (over those its driver reports), which lease selectors match. */
    labels: LabelsSchema.default({}),
  })
  .strict()
  .refine((b) => b.minResources <= b.maxResources, {
    message: 'the warm minimum (minResources) cannot exceed maxResources',
    path: ['minResources'],
  });
export type BlueprintInput = z.input<typeof BlueprintInputSchema>;

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
    labels,
  } = parsed.data;
  // Stored as given, not with the driver's defaults filled in: a default is
  // the code's, applied by each worker as it makes the driver (registry.ts).
  // So a setting a new release adds, with a default, never reaches the
  // workers of the release before it, which would refuse it as unknown in
  // the middle of a rolling upgrade (docs/upgrades.md).
  validateDriverSettings(driver, parsed.data.settings);
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
      labels: JSON.stringify(labels),
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
