import { performance } from 'node:perf_hooks';
import { z } from 'zod';

/** One job run: the object it acted on (its queue), when it ran (ms on the machine's clock), and whether it threw. */
export interface JobRun {
  readonly object: string;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly failed: boolean;
}

/** The job runs of one run of the peer, summed up. */
export const JobRunSummarySchema = z.object({
  runs: z.number(),
  /** Runs that threw (graphile-worker retries them later). */
  failed: z.number(),
  /** Runs that started while another run of the same object was still running, in any process. */
  overlapping: z.number(),
  /** Times a process's runner stopped on a fatal error and was started again (0 in figures from before it was counted). */
  runnerRestarts: z.number().default(0),
});
export type JobRunSummary = z.infer<typeof JobRunSummarySchema>;

/**
 * The runs of one worker process's jobs, kept until taken. Times are on the
 * machine's wall clock at sub-millisecond resolution (timeOrigin + now), so
 * runs from different processes compare.
 */
export class JobRuns {
  private runs: JobRun[] = [];

  async record(object: string, work: () => Promise<void>): Promise<void> {
    const startedAt = performance.timeOrigin + performance.now();
    let failed = true;
    try {
      await work();
      failed = false;
    } finally {
      this.runs.push({ object, startedAt, endedAt: performance.timeOrigin + performance.now(), failed });
    }
  }

  take(): JobRun[] {
    const taken = this.runs;
    this.runs = [];
    return taken;
  }
}

/**
 * Counts the runs that started while another run of their object was still
 * running: graphile-worker runs a named queue's jobs one at a time, so with
 * a queue per object this should be 0.
 */
export function summarizeRuns(runs: readonly JobRun[], runnerRestarts: number): JobRunSummary {
  const byObject = new Map<string, JobRun[]>();
  for (const run of runs) {
    const list = byObject.get(run.object);
    if (list) list.push(run);
    else byObject.set(run.object, [run]);
  }
  let overlapping = 0;
  for (const list of byObject.values()) {
    list.sort((a, b) => a.startedAt - b.startedAt);
    let busyUntil = Number.NEGATIVE_INFINITY;
    for (const run of list) {
      if (run.startedAt < busyUntil) overlapping++;
      busyUntil = Math.max(busyUntil, run.endedAt);
    }
  }
  return { runs: runs.length, failed: runs.filter((run) => run.failed).length, overlapping, runnerRestarts };
}
