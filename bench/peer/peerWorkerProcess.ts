import { run, type Runner, type TaskList } from 'graphile-worker';
import { z } from 'zod';
import { createLogger } from '../../src/log.ts';
import { graphileLogger } from '../../src/worker/graphileLogger.ts';
import { answerFleet } from '../answerFleet.ts';
import { PeakRss } from '../peakRss.ts';
import type { FromWorker, ToWorker } from '../workerProtocol.ts';
import { JobRuns } from './jobRuns.ts';
import { PEER_COMMANDS } from './peerCommands.ts';
import { PeerProfileSchema, runnerOptions } from './peerProfiles.ts';
import type { FromPeerWorker, ToPeerWorker } from './peerProtocol.ts';

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

async function handle(message: ToWorker | ToPeerWorker): Promise<FromWorker | FromPeerWorker> {
  switch (message.type) {
    case 'start':
      rss = new PeakRss();
      runner = await run({ ...options, taskList, logger: graphileLogger(log) });
      return { type: 'started', concurrency: options.concurrency ?? 1 };
    case 'takePeakRss':
      return { type: 'peakRss', bytes: rss?.take() ?? 0 };
    case 'takeJobRuns':
      return { type: 'jobRuns', runs: runs.take() };
    case 'stop':
      await runner?.stop();
      return { type: 'stopped' };
  }
}

answerFleet(handle, log);
