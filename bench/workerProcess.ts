import { loadConfig } from '../src/config.ts';
import { Database } from '../src/db/Database.ts';
import { createLogger } from '../src/log.ts';
import { SlipwayWorker, workerPoolSize } from '../src/worker/SlipwayWorker.ts';
import type { FromWorker, ToWorker } from './workerProtocol.ts';

/**
 * One worker process of the benchmark, forked by WorkerFleet: a SlipwayWorker
 * as a deployment runs it, configured by the same SLIPWAY_* variables. It
 * loads and connects first and starts working only on 'start', so module
 * loading is outside the timed window.
 */
const config = loadConfig();
if (!config.DATABASE_URL) throw new Error('bench/workerProcess.ts is started by the benchmark, which sets DATABASE_URL');
const log = createLogger(config.LOG_LEVEL, 'bench-worker');
const database = await Database.open(config, log, { poolSize: workerPoolSize(config) });

/** The highest resident set size seen since the last take(), sampled every 100 ms. */
class PeakRss {
  private peak = 0;

  constructor() {
    setInterval(() => this.sample(), 100).unref();
  }

  take(): number {
    this.sample();
    const peak = this.peak;
    this.peak = 0;
    return peak;
  }

  private sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss());
  }
}

let worker: SlipwayWorker | undefined;
let rss: PeakRss | undefined;
let stopped = false;

async function handle(message: ToWorker): Promise<FromWorker> {
  switch (message.type) {
    case 'start':
      rss = new PeakRss();
      worker = await SlipwayWorker.start(database, config, log);
      return { type: 'started', concurrency: config.SLIPWAY_WORKER_CONCURRENCY };
    case 'takePeakRss':
      return { type: 'peakRss', bytes: rss?.take() ?? 0 };
    case 'stop':
      await worker?.stop();
      await database.close();
      stopped = true;
      return { type: 'stopped' };
  }
}

process.on('message', (message: ToWorker) => {
  handle(message).then(
    (reply) => {
      process.send!(reply);
      if (reply.type === 'stopped') process.disconnect();
    },
    (error) => {
      log.error({ err: error }, `benchmark worker failed on ${message.type}`);
      process.exit(1);
    },
  );
});
// An orphan (the benchmark was killed) must not keep draining.
process.on('disconnect', () => {
  if (!stopped) process.exit(1);
});
process.send!({ type: 'ready' } satisfies FromWorker);
