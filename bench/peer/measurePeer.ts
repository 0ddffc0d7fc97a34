import { fileURLToPath } from 'node:url';
import { makeWorkerUtils } from 'graphile-worker';
import { z } from 'zod';
import type { Logger } from '../../src/log.ts';
import { graphileLogger } from '../../src/graphileLogger.ts';
import type { Database } from '../../src/db/Database.ts';
import { WorkerFleet } from '../WorkerFleet.ts';
import { JobRunSummarySchema, summarizeRuns } from './jobRuns.ts';
import { type PeerProfile, PeerProfileSchema } from './peerProfiles.ts';
import { PEER_WORKER_SCHEMA } from './peerSchema.ts';
import type { FromPeerWorker, ToPeerWorker } from './peerProtocol.ts';
import { PeerSystem } from './PeerSystem.ts';

const PEER_WORKER_MODULE = fileURLToPath(new URL('./peerWorkerProcess.ts', import.meta.url));

/** What every run of the peer reports besides its figures. */
export const PeerRunSchema = z.object({
  profile: PeerProfileSchema,
  /** Each worker process's concurrency. */
  concurrency: z.array(z.number()),
  /** Every job the run ran: how many failed, how many overlapped another of the same object. */
  jobs: JobRunSummarySchema,
  /** Each worker process's peak RSS during the run, in bytes. */
  peakRssBytes: z.array(z.number()),
});
export type PeerRun = z.infer<typeof PeerRunSchema>;

/**
 * Starts `shape.workers` peer worker processes with the profile's options
 * (`shape.concurrency` jobs at once each, when tuned), runs
 * `measure` on the peer, and stops them; returns its figures with the run's
 * job runs summed up and the processes' peak RSS. The peer's tables must be
 * installed (installPeer); no Slipway worker should be running.
 */
export async function runPeer<T extends object>(
  database: Database,
  profile: PeerProfile,
  shape: { workers: number; concurrency: number },
  log: Logger,
  measure: (peer: PeerSystem) => Promise<T>,
): Promise<T & PeerRun> {
  const utils = await makeWorkerUtils({ connectionString: database.url, schema: PEER_WORKER_SCHEMA, logger: graphileLogger(log) });
  const fleet = await WorkerFleet.launch<ToPeerWorker, FromPeerWorker>(shape.workers, database.url, {
    module: PEER_WORKER_MODULE,
    env: { BENCH_PEER_PROFILE: profile, BENCH_PEER_CONCURRENCY: String(shape.concurrency) },
  });
  try {
    const concurrency = await fleet.start();
    const figures = await measure(new PeerSystem(database.pool, database.url, fleet, utils, profile));
    const replies = await fleet.askAll({ type: 'takeJobRuns' }, 'jobRuns');
    const runs = replies.flatMap((reply) => reply.runs);
    const runnerRestarts = replies.reduce((sum, reply) => sum + reply.runnerRestarts, 0);
    const peakRssBytes = await fleet.takePeakRss();
    await fleet.stop();
    return { ...figures, profile, concurrency, jobs: summarizeRuns(runs, runnerRestarts), peakRssBytes };
  } catch (error) {
    fleet.kill();
    throw error;
  } finally {
    await utils.release();
  }
}
