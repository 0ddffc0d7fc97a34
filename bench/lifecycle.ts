import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { createLeases } from './leases.ts';
import type { LeaseSystem, PoolShape } from './LeaseSystem.ts';
import { pollUntil, runClients, throughput, ThroughputSchema } from './measure.ts';

export const LifecycleSchema = z.object({
  leases: z.number(),
  slots: z.number(),
  /** Leases taken from created to destroyed, per second of the whole window. */
  lifecycles: ThroughputSchema,
});
export type Lifecycle = z.infer<typeof LifecycleSchema>;

/** A system that cannot finish the lifecycles in this long fails the run instead of hanging it. */
const LIFECYCLE_TIMEOUT_MS = 30 * 60_000;
/** How often the holders look for leases that became active: what a lease's use lasts, at least. */
const HOLDER_POLL_MS = 20;

/**
 * (c) The lifecycle users run, with the running workers: `leases` leases
 * created at once on a new pool of `shape` (fewer slots than leases), each
 * made active on a resource, then released by its holder as soon as it
 * shows active, and destroyed, which gives its slot back to the next lease
 * waiting. Timed from the first create until every lease is destroyed and
 * nothing is left to do.
 */
export async function measureLifecycle(system: LeaseSystem, shape: PoolShape, leases: number, clients: number): Promise<Lifecycle> {
  const poolId = await system.createPool('lifecycle', shape);
  const released = new Set<number>();
  // The holders: every lease seen active is released, from `clients` connections.
  const releaseActive = async () => {
    const fresh = (await system.activeLeases(poolId)).filter((id) => !released.has(id));
    for (const id of fresh) released.add(id);
    await runClients(clients, fresh.length, (n) => system.release(fresh[n]!));
    return released.size === leases && (await system.countIn(poolId, 'destroyed')) === leases && (await system.quiet());
  };

  await system.maintain();
  const started = performance.now();
  await system.whileRunning(
    Promise.all([
      createLeases(system, poolId, leases, clients),
      pollUntil(`${leases} ${system.name} lifecycles`, releaseActive, LIFECYCLE_TIMEOUT_MS, HOLDER_POLL_MS),
    ]),
  );
  return {
    leases,
    slots: shape.resources * shape.slotsPerResource,
    lifecycles: throughput(leases, (performance.now() - started) / 1000),
  };
}
