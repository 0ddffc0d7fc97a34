import { performance } from 'node:perf_hooks';
import type { Db } from '../src/db/Database.ts';
import { allQueuesEmpty, commandsByStatus, type StatusCounts } from './commandCounts.ts';
import { pollUntil, throughput, type Throughput } from './measure.ts';
import type { WorkerFleet } from './WorkerFleet.ts';

export interface DrainResult extends Throughput {
  /** Commands that reached each final status during the window. */
  readonly settled: Pick<StatusCounts, 'done' | 'cancelled' | 'coalesced' | 'failed'>;
  /** Each worker's drain concurrency. */
  readonly concurrency: readonly number[];
  /** (f) Each worker process's peak RSS during the window, in bytes. */
  readonly peakRssBytes: readonly number[];
}

/** A stuck engine fails the run instead of hanging it. */
const DRAIN_TIMEOUT_MS = 10 * 60_000;

/**
 * (c) and (f): starts the workers on the backlog (b) left and times them from
 * start until no command is queued or running. The count is every command
 * that settled (done, cancelled, coalesced) in that window, the follow-ups
 * the releases caused included; `failed` ones are reported, not counted.
 */
export async function measureDrain(db: Db, fleet: WorkerFleet): Promise<DrainResult> {
  const before = await commandsByStatus(db);
  const started = performance.now();
  const concurrency = await fleet.start();
  await fleet.whileRunning(pollUntil('every command queue to empty', () => allQueuesEmpty(db), DRAIN_TIMEOUT_MS));
  const seconds = (performance.now() - started) / 1000;
  const peakRssBytes = await fleet.takePeakRss();
  const after = await commandsByStatus(db);

  const delta = (status: keyof StatusCounts) => after[status] - before[status];
  const settled = { done: delta('done'), cancelled: delta('cancelled'), coalesced: delta('coalesced'), failed: delta('failed') };
  return {
    ...throughput(settled.done + settled.cancelled + settled.coalesced, seconds),
    settled,
    concurrency,
    peakRssBytes,
  };
}
