import type { JobRun } from './jobRuns.ts';

/** What the benchmark asks a peer worker process beyond workerProtocol.ts. */
export type ToPeerWorker = { readonly type: 'takeJobRuns' };

/** What it answers. */
export type FromPeerWorker = { readonly type: 'jobRuns'; readonly runs: readonly JobRun[]; readonly runnerRestarts: number };
