import { z } from 'zod';
import { LabelsSchema } from '../domain/labels.ts';
import { OrphansSettingSchema } from '../domain/orphans.ts';
import { PreemptionSettingsSchema } from '../domain/preemption.ts';

// A blueprint's input schemas, apart from the code that writes blueprints: the
// API's contract, and so the client library and the CLI's remote mode, use
// them without loading the database, the drivers or the command queue.

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
    /**
     * The longest a lease may be held, from its grant to its end, renewals
     * included; absent: no limit (docs/scheduling.md, "Lease time limits").
     */
    maxHoldMs: z
      .number()
      .int()
      .min(1000, 'expected at least 1 s')
      .max(366 * 24 * 3600 * 1000)
      .optional(),
    /** How fast what a team used at the blueprint is forgotten, for fair share: each second of a slot held weighs half as much this much later. */
    fairShareHalfLifeMs: z
      .number()
      .int()
      .min(1)
      .max(365 * 24 * 3600 * 1000, 'expected at most a year')
      .default(3_600_000),
    /** Whether, and how, it takes slots back from active leases for waiting leases of higher priority; absent: never (docs/scheduling.md, "Preemption"). */
    preemption: PreemptionSettingsSchema.optional(),
    /** Labels every resource of it carries (over those its driver reports), which lease selectors match. */
    labels: LabelsSchema.default({}),
    /** What the collector does with what its driver lists that no resource stands for: report it, or destroy it through the driver. */
    orphans: OrphansSettingSchema.default('report'),
  })
  .strict()
  .refine((b) => b.minResources <= b.maxResources, {
    message: 'the warm minimum (minResources) cannot exceed maxResources',
    path: ['minResources'],
  });
export type BlueprintInput = z.input<typeof BlueprintInputSchema>;

/**
 * What may change on a blueprint directly: its limits, how often its
 * resources are checked (`checkIntervalMs`, null for never) and whether
 * slots are cleaned between leases (from the next slot given back on). A new
 * `leasesPerResource` applies to resources made from then on; a lower
 * `maxResources` stops new resources until the count is below it. Every
 * change (and every enable or disable) queues `serve_waiters`, so room it
 * made goes to the leases waiting.
 *
 * Driver settings are not among them: new settings may leave live resources
 * that no longer fit (a static pool's entries), so they change only through
 * the blueprint's own queue (`update_settings`), whose drain reconciles the
 * resources with them. The key is named here only to say so.
 */
const {
  maxResources,
  leasesPerResource,
  checkIntervalMs,
  cleanBetweenLeases,
  cleanAttempts,
  priorityStepMs,
  maxHoldMs,
  fairShareHalfLifeMs,
  preemption,
  labels,
  orphans,
} = BlueprintInputSchema.shape;
export const BlueprintChangesSchema = z
  .object({
    // Without the defaults creation fills in: a field left out stays as it is.
    maxResources: maxResources.optional(),
    leasesPerResource: leasesPerResource.unwrap().optional(),
    checkIntervalMs: checkIntervalMs.unwrap().nullable().optional(),
    cleanBetweenLeases: cleanBetweenLeases.unwrap().optional(),
    cleanAttempts: cleanAttempts.unwrap().optional(),
    priorityStepMs: priorityStepMs.unwrap().optional(),
    /** Null: no limit. Applies to leases granted from then on (a lease's limit is fixed by its grant). */
    maxHoldMs: maxHoldMs.unwrap().nullable().optional(),
    fairShareHalfLifeMs: fairShareHalfLifeMs.unwrap().optional(),
    /** Null: preempt nothing from now on (preemptions under way are withdrawn). */
    preemption: preemption.unwrap().nullable().optional(),
    /** Replaces the blueprint's labels (every resource's, at once: they are read with the blueprint's). */
    labels: labels.unwrap().optional(),
    orphans: orphans.unwrap().optional(),
    settings: z
      .undefined({
        error:
          'driver settings change through the update_settings command (POST /v1/blueprints/{id}/commands, or slipway blueprint update), which reconciles the resources with them',
      })
      .optional(),
  })
  .strict()
  .refine(
    (changes) => Object.keys(changes).length > 0,
    'name at least one of maxResources, leasesPerResource, checkIntervalMs, cleanBetweenLeases, cleanAttempts, priorityStepMs, maxHoldMs, fairShareHalfLifeMs, preemption, labels, orphans',
  );
export type BlueprintChanges = z.input<typeof BlueprintChangesSchema>;
