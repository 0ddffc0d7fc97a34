import { loadConfig } from '../src/config.ts';
import { Database } from '../src/db/Database.ts';
import { createLogger } from '../src/log.ts';
import { SlipwayWorker } from '../src/worker/SlipwayWorker.ts';
import { workerPoolSize } from '../src/worker/workerPoolSize.ts';
import { answerFleet } from './answerFleet.ts';
import { PeakRss } from './peakRss.ts';
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

let worker: SlipwayWorker | undefined;
let rss: PeakRss | undefined;

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
      return { type: 'stopped' };
  }
}

answerFleet(handle, log);
