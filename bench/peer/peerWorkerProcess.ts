import { EventEmitter } from 'node:events';
import { run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import { z } from 'zod';
import { createLogger } from '../../src/log.ts';
import { graphileLogger } from '../../src/graphileLogger.ts';
import { answerFleet } from '../answerFleet.ts';
import { PeakRss } from '../peakRss.ts';
import type { FromWorker, ToWorker } from '../workerProtocol.ts';
import { JobRuns } from './jobRuns.ts';
import { PEER_COMMANDS } from './peerCommands.ts';
import { PeerProfileSchema, runnerOptions } from './peerProfiles.ts';
import type { FromPeerWorker, ToPeerWorker } from './peerProtocol.ts';
import { PEER_WORKER_SCHEMA } from './peerSchema.ts';

/**
 * One worker process of the peer, forked by WorkerFleet like Slipway's: a
 * graphile-worker runner with the options of BENCH_PEER_PROFILE (at
 * BENCH_PEER_CONCURRENCY, when tuned), running the
 * peer's commands, each job recorded (its object, when it ran) so the
 * benchmark can count runs of one object that overlapped, across processes.
 */
const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('bench/peer/peerWorkerProcess.ts is started by the benchmark, which sets DATABASE_URL');
const options = runnerOptions(
  PeerProfileSchema.parse(process.env.BENCH_PEER_PROFILE),
  z.coerce.number().int().min(1).parse(process.env.BENCH_PEER_CONCURRENCY),
  databaseUrl,
);
const log = createLogger(process.env.LOG_LEVEL ?? 'warn', 'bench-peer');
const runs = new JobRuns();

const taskList: TaskList = Object.fromEntries(
  Object.entries(PEER_COMMANDS).map(([identifier, peerCommand]) => [
    identifier,
    async (payload, helpers) => {
      const { object, run: work } = peerCommand.prepare(payload);
      await runs.record(object, () => helpers.withPgClient(work));
    },
  ]),
);

let runner: Runner | undefined;
let rss: PeakRss | undefined;
let stopping = false;
let runnerRestarts = 0;

/**
 * Starts a runner, and starts another if it stops on a fatal error (under
 * load its local queue can lose a deadlock on graphile-worker's
 * _private_job_queues), as a deployment's supervisor would. A runner whose
 * jobs could not be marked complete reports a fatal error and begins a
 * graceful shutdown that may never end (the jobs stay locked), so the
 * fatal error itself starts the replacement, not only the runner's end.
 * The jobs the dead runner had locked are unlocked first: graphile-worker
 * would otherwise leave them locked for its 4-hour lock timeout.
 */
async function startRunner(): Promise<Runner> {
  let locker: string | undefined;
  let replaced = false;
  const events = new EventEmitter() as WorkerEvents;
  // graphile-worker 0.17 locks a runner's jobs under its pool's id, local queue or not.
  events.on('pool:create', ({ workerPool }) => {
    locker = workerPool.id;
  });
  const replace = async (error: unknown) => {
    if (replaced || stopping) return;
    replaced = true;
    log.warn({ err: error }, 'peer runner stopped on a fatal error; starting another');
    runnerRestarts++;
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await client.query(`select ${PEER_WORKER_SCHEMA}.force_unlock_workers($1::text[])`, [[locker]]);
    } finally {
      await client.end();
    }
    runner = await startRunner();
  };
  events.on('pool:fatalError', ({ error }) => void replace(error));
  const started = await run({ ...options, taskList, logger: graphileLogger(log), events });
  void started.promise.then(
    () => replace(new Error('runner ended')),
    (error: unknown) => replace(error),
  );
  return started;
}

async function handle(message: ToWorker | ToPeerWorker): Promise<FromWorker | FromPeerWorker> {
  switch (message.type) {
    case 'start':
      rss = new PeakRss();
      runner = await startRunner();
      return { type: 'started', concurrency: options.concurrency ?? 1 };
    case 'takePeakRss':
      return { type: 'peakRss', bytes: rss?.take() ?? 0 };
    case 'takeJobRuns':
      return { type: 'jobRuns', runs: runs.take(), runnerRestarts };
    case 'stop':
      stopping = true;
      await runner?.stop();
      return { type: 'stopped' };
  }
}

answerFleet(handle, log);
