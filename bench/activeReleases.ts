import { performance } from 'node:perf_hooks';
import { createActiveLeases } from './leases.ts';
import type { LeaseSystem } from './LeaseSystem.ts';
import { pollUntil, runClients, throughput, type Throughput } from './measure.ts';

/** A system that cannot settle the releases in this long fails the run instead of hanging it. */
const SETTLE_TIMEOUT_MS = 30 * 60_000;

/**
 * (c) Settled releases of active leases: `count` leases made active
 * (untimed), then one release each appended from `clients` connections as
 * fast as they go, with the workers running. Timed from the first append
 * until every lease is destroyed, its slot given back, and nothing is left
 * to do. Each release takes the realistic path: a driver call, the lease destroyed, the
 * slot's return to its resource. `beforeReleases` runs once the leases
 * are active, just before the timed window (bench/profile.ts starts its
 * instruments there).
 */
export async function measureActiveReleases(
  system: LeaseSystem,
  count: number,
  clients: number,
  beforeReleases: () => Promise<void> = async () => {},
): Promise<Throughput> {
  const { poolId, leaseIds } = await createActiveLeases(system, 'active-releases', count, clients);
  const allSettled = async () => (await system.countIn(poolId, 'destroyed')) === count && (await system.quiet());

  await system.maintain();
  await beforeReleases();
  const started = performance.now();
  await system.whileRunning(runClients(clients, count, (n) => system.release(leaseIds[n]!)));
  await system.whileRunning(pollUntil(`${count} ${system.name} releases to settle`, allSettled, SETTLE_TIMEOUT_MS, 20));
  return throughput(count, (performance.now() - started) / 1000);
}
