import type { RunnerOptions } from 'graphile-worker';
import { z } from 'zod';
import { PEER_WORKER_SCHEMA } from './peerSchema.ts';

/** How the peer's graphile-worker runners are configured: tuned for throughput, or as they come. */
export const PeerProfileSchema = z.enum(['tuned', 'defaults']);
export type PeerProfile = z.infer<typeof PeerProfileSchema>;

/**
 * The runner options of a profile, apart from the task list and logger.
 * 'tuned' runs `concurrency` jobs at once and follows graphile-worker's
 * performance advice: a local queue (its release notes suggest concurrency
 * + 1 to start with), batched job completion and failure, prepared
 * statements (its default, spelled out), and a pool with room for each job's
 * own transaction besides its fetches and completions (its docs: at least
 * concurrency + 2, more when tasks use the pool). 'defaults' sets nothing:
 * concurrency 1, no local queue, no batching.
 */
export function runnerOptions(profile: PeerProfile, concurrency: number, connectionString: string): RunnerOptions {
  const common = { connectionString, schema: PEER_WORKER_SCHEMA, noHandleSignals: true };
  if (profile === 'defaults') return common;
  return {
    ...common,
    concurrency,
    maxPoolSize: concurrency + 4,
    preset: {
      worker: {
        localQueue: { size: concurrency + 1 },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
        preparedStatements: true,
      },
    },
  };
}
