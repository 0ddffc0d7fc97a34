import { performance } from 'node:perf_hooks';
import { run } from 'graphile-worker';
import type pg from 'pg';
import type { Logger } from '../src/log.ts';
import { graphileLogger } from '../src/worker/graphileLogger.ts';
import { pollUntil, throughput, type Throughput } from './measure.ts';

/** A stuck runner fails the run instead of hanging it. */
const GRAPHILE_TIMEOUT_MS = 10 * 60_000;

/**
 * (d) graphile-worker on its own, for comparison with (c): `jobs` no-op jobs
 * added in one statement, then one runner in this process with
 * graphile-worker's defaults (concurrency 1, its own pool), timed from start
 * until no no-op job is left. Only the logger (quiet) and signal handling
 * (left to the benchmark) differ from `run({ taskList })`; neither affects
 * speed. Slipway's workers are stopped by then, so nothing else competes.
 */
export async function measureGraphileWorker(pool: pg.Pool, databaseUrl: string, jobs: number, log: Logger): Promise<Throughput> {
  await pool.query(
    `select graphile_worker.add_jobs(array(
       select row('noop', '{}', null, null, null, null, null, null)::graphile_worker.job_spec
       from generate_series(1, $1)))`,
    [jobs],
  );
  // Only our jobs: drain wake-ups left over from the Slipway phases stay
  // queued, since no Slipway worker runs now.
  const allNoopsRun = async () =>
    (await pool.query(`select 1 from graphile_worker.jobs where task_identifier = 'noop' limit 1`)).rowCount === 0;

  const started = performance.now();
  const runner = await run({
    connectionString: databaseUrl,
    taskList: { noop: async () => {} },
    noHandleSignals: true,
    logger: graphileLogger(log),
  });
  try {
    await pollUntil('graphile-worker to run every no-op job', allNoopsRun, GRAPHILE_TIMEOUT_MS);
    return throughput(jobs, (performance.now() - started) / 1000);
  } finally {
    await runner.stop();
  }
}
