import { z } from 'zod';
import { createActiveLeases } from './leases.ts';
import type { LeaseSystem, Milestone } from './LeaseSystem.ts';
import { openLoop, percentiles, PercentilesSchema, pollUntil } from './measure.ts';

/** Time from an open-loop send to a lease's milestone, at one offered rate. */
export const MilestoneLatencySchema = z.object({
  targetRate: z.number(),
  sent: z.number(),
  /** The rate the generator kept (it catches up when late, never skips). */
  achievedRate: z.number(),
  /** Leases per second from the first scheduled send until the last reached its milestone: below the target, the system fell behind. */
  settledRate: z.number(),
  ...PercentilesSchema.shape,
});
export type MilestoneLatency = z.infer<typeof MilestoneLatencySchema>;

export interface OpenLoad {
  readonly rate: number;
  readonly seconds: number;
}

/** A backlog the workers cannot clear in this long fails the run instead of hanging it. */
const SETTLE_TIMEOUT_MS = 30 * 60_000;

/**
 * (e) Releases of active leases, open loop at `load.rate` per second for
 * `load.seconds` with the workers running: from each release's scheduled
 * time until the system announces its lease destroyed.
 */
export async function measureReleaseLatency(system: LeaseSystem, load: OpenLoad, clients: number): Promise<MilestoneLatency> {
  const { leaseIds } = await createActiveLeases(system, `latency-${load.rate}`, load.rate * load.seconds, clients);
  return timeToMilestone(system, load, 'destroyed', async (n) => {
    await system.release(leaseIds[n]!);
    return leaseIds[n]!;
  });
}

/**
 * (i) Leases created open loop at `load.rate` per second on a pool with a
 * free slot for every one of them: from each create's scheduled time until
 * the system announces the lease active.
 */
export async function measureActivation(system: LeaseSystem, load: OpenLoad): Promise<MilestoneLatency> {
  const poolId = await system.warmPool('activation', load.rate * load.seconds);
  return timeToMilestone(system, load, 'active', () => system.createLease(poolId));
}

/**
 * Sends `send(n)` (which names the lease it acts on) open loop and times
 * each lease from its send's scheduled time to `milestone`; returns once the
 * system is quiet again, so the next figure starts on an idle one.
 */
async function timeToMilestone(
  system: LeaseSystem,
  load: OpenLoad,
  milestone: Milestone,
  send: (n: number) => Promise<number>,
): Promise<MilestoneLatency> {
  const total = load.rate * load.seconds;
  await system.maintain();
  const watch = await system.watch();
  try {
    const sent = await system.whileRunning(openLoop(total, load.rate, send));
    const reachedAt = await system.whileRunning(watch.reachedAt(sent.results, milestone));
    await system.whileRunning(pollUntil(`the ${system.name} workers to finish`, () => system.quiet(), SETTLE_TIMEOUT_MS));
    const last = reachedAt.reduce((a, b) => Math.max(a, b), 0);
    return {
      targetRate: load.rate,
      sent: total,
      achievedRate: sent.achievedRate,
      settledRate: total / ((last - sent.dueAt[0]!) / 1000),
      ...percentiles(reachedAt.map((at, n) => at - sent.dueAt[n]!)),
    };
  } finally {
    await watch.close();
  }
}
