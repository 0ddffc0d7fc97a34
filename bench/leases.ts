import type { LeaseSystem, Milestone } from './LeaseSystem.ts';
import { pollUntil, runClients } from './measure.ts';

/**
 * Setup that the system cannot finish in this long fails the run instead of
 * hanging it: ten minutes, and a tenth of a second more per lease waited
 * for. A pool's leases are made active one blueprint decision at a time
 * (docs/known-limits.md), at 25–80 a second on a 2-core machine, so the
 * 15,000 leases of (e) at 1,000/s alone can take ten minutes.
 */
const setupTimeoutMs = (leases: number) => 10 * 60_000 + leases * 100;

/** Creates `count` leases on the pool from `clients` connections, through the system's ordinary path; returns their ids. */
export async function createLeases(system: LeaseSystem, poolId: number, count: number, clients: number): Promise<number[]> {
  const ids: number[] = new Array(count);
  await runClients(clients, count, async (n) => {
    ids[n] = await system.createLease(poolId);
  });
  return ids;
}

/**
 * `count` leases on a new pool, taken all the way to active by the running
 * workers (untimed setup); returns once the system is quiet again.
 */
export async function createActiveLeases(
  system: LeaseSystem,
  name: string,
  count: number,
  clients: number,
): Promise<{ poolId: number; leaseIds: number[] }> {
  // Room for twice the leases, so no lease waits for a slot: the peer takes
  // a free slot by row lock, and with room to spare few of its leases meet a full resource.
  const poolId = await system.warmPool(name, 2 * count);
  const leaseIds = await createLeases(system, poolId, count, clients);
  await untilCount(system, poolId, 'active', count);
  return { poolId, leaseIds };
}

/** Waits until `count` of the pool's leases are in `state` and nothing is left to do. */
export async function untilCount(system: LeaseSystem, poolId: number, state: Milestone, count: number): Promise<void> {
  const reached = async () => (await system.countIn(poolId, state)) === count && (await system.quiet());
  await system.whileRunning(pollUntil(`${count} ${system.name} leases to be ${state}`, reached, setupTimeoutMs(count), 100));
}
