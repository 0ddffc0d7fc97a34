import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { LabelsSchema } from '../domain/labels.ts';
import {
  type Driver,
  type DriverCall,
  type DriverFactory,
  DRIVER_OPERATIONS,
  type DriverOperation,
  ListedResourceSchema,
  PermanentDriverError,
  TransientDriverError,
} from './Driver.ts';

/** The key of an orphan's destroy effect: what it removed, so a listing can leave it out. */
const orphanKey = (id: string) => `orphan:${id}`;
/** Its id for a slot it holds: unique in the blueprint, as listed ids are. */
const slotId = (resourceId: number, slot: number) => `resource-${resourceId}/slot-${slot}`;
/** The key of a held slot's cleaning: the slot it freed, so a listing of the resource's slots can leave it out. */
const heldSlotKey = (slot: number) => `held-slot:${slot}`;

const rate = z.number().min(0).max(1);
const Settings = z
  .object({
    /** Each call takes a random time in [min, max] milliseconds. */
    latencyMs: z
      .object({ min: z.number().int().min(0).max(600_000), max: z.number().int().min(0).max(600_000) })
      .strict()
      .refine((l) => l.min <= l.max, 'latencyMs.min must not exceed latencyMs.max')
      .default({ min: 0, max: 0 }),
    /** Chance that a call fails with a transient error (before any effect). */
    transientFailureRate: rate.default(0),
    /** The retry hint a transient failure carries (default: none, so Slipway's backoff applies). */
    transientRetryAfterMs: z.number().int().min(1).max(600_000).optional(),
    /** Chance that a call fails for good (before any effect). */
    permanentFailureRate: rate.default(0),
    /** Limit failures to these operations (default: all). */
    failOperations: z.array(z.enum(DRIVER_OPERATIONS)).optional(),
    /** Per-operation latency overrides, e.g. a slow releaseLease for crash tests. */
    operationLatencyMs: z.partialRecord(z.enum(DRIVER_OPERATIONS), z.number().int().min(0).max(600_000)).optional(),
    /**
     * Record each effect in `simulated_effects` (the default). Off, a call
     * touches nothing, as a driver whose infrastructure is elsewhere: the
     * benchmark turns it off, so that it measures Slipway's own work and
     * not a commit per driver call that no real driver would make.
     */
    recordEffects: z.boolean().default(true),
    /**
     * What checkResource answers: gone or unhealthy for the resources listed
     * (by id), or by chance; healthy otherwise. For tests of the observe
     * loop; `blueprint update` changes it like any setting.
     */
    checks: z
      .object({
        gone: z.array(z.number().int().positive()).default([]),
        unhealthy: z.array(z.number().int().positive()).default([]),
        goneRate: rate.default(0),
        unhealthyRate: rate.default(0),
      })
      .strict()
      .default({ gone: [], unhealthy: [], goneRate: 0, unhealthyRate: 0 }),
    /** The labels it reports for every resource it allocates (the blueprint's go over them). */
    labels: LabelsSchema.default({}),
    /**
     * What else it holds, as listResources reports it, until destroyOrphan
     * removes it: things made by hand, or by an allocate whose commit was
     * lost, for tests of the collector's orphans.
     */
    holds: z.array(ListedResourceSchema).max(1000).default([]),
    /**
     * The slots it holds on resources beyond those of its leases, as
     * listSlots reports them, until cleanSlot frees them: a slot a lease
     * lost with its rows, for tests of the collector's orphaned slots.
     * (It lists no other slot: its leases' slots are not listed.)
     */
    holdsSlots: z
      .array(z.object({ resourceId: z.number().int().positive(), slot: z.number().int().min(0).max(10_000) }).strict())
      .max(1000)
      .default([]),
  })
  .strict();
type Settings = z.infer<typeof Settings>;

/**
 * A stand-in for real infrastructure with configurable latency and failures.
 * Every effect is recorded in `simulated_effects` (unless `recordEffects` is
 * off), keyed by operation, object and idempotency key, with a count of the
 * calls that reached it, so tests can tell "the effect happened once" from
 * "the call was repeated".
 */
export const SimulatedDriver: DriverFactory<Settings> = {
  name: 'simulated',
  description: 'no real infrastructure: configurable latency and failure rates, effects recorded for tests',
  settingsSchema: Settings,
  possibleLabels: (settings) => [settings.labels],
  create(settings, services) {
    const perform = async (operation: DriverOperation, objectId: number, call: DriverCall) => {
      const { min, max } = settings.latencyMs;
      const latency = settings.operationLatencyMs?.[operation] ?? min + Math.random() * (max - min);
      if (latency > 0) await sleep(latency);
      const mayFail = !settings.failOperations || settings.failOperations.includes(operation);
      if (mayFail && Math.random() < settings.permanentFailureRate) {
        throw new PermanentDriverError(`simulated permanent failure in ${operation}`);
      }
      if (mayFail && Math.random() < settings.transientFailureRate) {
        throw new TransientDriverError(`simulated transient failure in ${operation}`, settings.transientRetryAfterMs);
      }
      if (settings.recordEffects) {
        await services.query(
          `insert into simulated_effects (operation, object_id, idempotency_key) values ($1, $2, $3)
           on conflict (operation, object_id, idempotency_key)
           do update set calls = simulated_effects.calls + 1, last_at = now()`,
          [operation, objectId, call.idempotencyKey],
        );
      }
      return { attributes: { simulated: true } };
    };
    return {
      allocateResource: async (call) => ({ ...(await perform('allocateResource', call.resource.id, call)), labels: settings.labels }),
      activateResource: (call) => perform('activateResource', call.resource.id, call),
      destroyResource: (call) => perform('destroyResource', call.resource.id, call),
      acquireLease: (call) => perform('acquireLease', call.lease.id, call),
      activateLease: (call) => perform('activateLease', call.lease.id, call),
      releaseLease: (call) => perform('releaseLease', call.lease.id, call),
      // A slot it holds is freed for good, keyed by the slot (not by the command): listSlots leaves it out from then on.
      cleanSlot: (call) =>
        perform(
          'cleanSlot',
          call.resource.id,
          settings.holdsSlots.some((held) => held.resourceId === call.resource.id && held.slot === call.slot)
            ? { ...call, idempotencyKey: heldSlotKey(call.slot) }
            : call,
        ),
      async checkResource(call) {
        await perform('checkResource', call.resource.id, call);
        const { gone, unhealthy, goneRate, unhealthyRate } = settings.checks;
        const id = call.resource.id;
        if (gone.includes(id) || Math.random() < goneRate) return { health: 'gone', message: `simulated: resource ${id} is gone` };
        if (unhealthy.includes(id) || Math.random() < unhealthyRate)
          return { health: 'unhealthy', message: `simulated: resource ${id} is unhealthy` };
        return { health: 'healthy' };
      },
      async listResources(call) {
        const { rows } = (await services.query(`select idempotency_key from simulated_effects where operation = 'destroyOrphan' and object_id = $1`, [
          call.blueprint.id,
        ])) as { rows: Array<{ idempotency_key: string }> };
        const destroyed = new Set(rows.map((r) => r.idempotency_key));
        return { resources: settings.holds.filter((held) => !destroyed.has(orphanKey(held.id))) };
      },
      async listSlots(call) {
        const { rows } = (await services.query(`select idempotency_key from simulated_effects where operation = 'cleanSlot' and object_id = $1`, [
          call.resource.id,
        ])) as { rows: Array<{ idempotency_key: string }> };
        const freed = new Set(rows.map((r) => r.idempotency_key));
        return {
          slots: settings.holdsSlots
            .filter((held) => held.resourceId === call.resource.id && !freed.has(heldSlotKey(held.slot)))
            .map((held) => ({ id: slotId(held.resourceId, held.slot), slot: held.slot })),
        };
      },
      // Recorded on the blueprint, keyed by what it removed (not by the command): listResources leaves it out from then on.
      destroyOrphan: (call) => perform('destroyOrphan', call.blueprint.id, { ...call, idempotencyKey: orphanKey(call.orphan.id) }),
    } satisfies Driver;
  },
};
