import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import type { Db } from '../src/db/Database.ts';
import { allQueuesEmpty, commandsByStatus, type StatusCounts } from './commandCounts.ts';
import { pollUntil, throughput, ThroughputSchema } from './measure.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

export const DrainSchema = ThroughputSchema.extend({
  /** Commands that reached each final status during the window. */
  settled: z.object({ done: z.number(), cancelled: z.number(), coalesced: z.number(), failed: z.number() }),
  /** Each worker's drain concurrency. */
  concurrency: z.array(z.number()),
});
export type Drain = z.infer<typeof DrainSchema>;

/** A stuck engine fails the run instead of hanging it. */
const DRAIN_TIMEOUT_MS = 10 * 60_000;

/**
 * (c) The cheap path: starts the workers on the backlog (b) left (a release
 * queued for each pending lease, whose request for a slot waits in its
 * blueprint's queue) and times them from start until no command is queued
 * or running. Releases of leases that never got a slot need no driver call
 * and no slot table, and the drain takes them in batches; the blueprint
 * decides the requests in runs, most of them for leases already gone. The count is every command that settled (done, cancelled,
 * coalesced) in that window, the follow-ups the releases caused included;
 * `failed` ones are reported, not counted.
 */
export async function measureDrain(db: Db, fleet: WorkerFleet): Promise<Drain> {
  const before = await commandsByStatus(db);
  const started = performance.now();
  const concurrency = await fleet.start();
  await fleet.whileRunning(pollUntil('every command queue to empty', () => allQueuesEmpty(db), DRAIN_TIMEOUT_MS));
  const seconds = (performance.now() - started) / 1000;
  const after = await commandsByStatus(db);

  const delta = (status: keyof StatusCounts) => after[status] - before[status];
  const settled = { done: delta('done'), cancelled: delta('cancelled'), coalesced: delta('coalesced'), failed: delta('failed') };
  return { ...throughput(settled.done + settled.cancelled + settled.coalesced, seconds), settled, concurrency };
}
