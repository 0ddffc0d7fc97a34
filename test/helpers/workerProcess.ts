/**
 * One Slipway worker as a process of its own, for tests that need real
 * separate workers (crashes, several lock holders):
 *
 *   DATABASE_URL=... LOG_LEVEL=warn node --import tsx test/helpers/workerProcess.ts
 *
 * Configured from the environment like a real worker (SLIPWAY_* settings).
 * Tells its parent it is ready over IPC when it has one, and stops cleanly
 * (drains in progress finish, its registry row goes) on SIGTERM or when that
 * parent goes away.
 */
import { loadConfig } from '../../src/config.ts';
import { Database } from '../../src/db/Database.ts';
import { createLogger } from '../../src/log.ts';
import { SlipwayWorker, workerPoolSize } from '../../src/worker/SlipwayWorker.ts';

const config = loadConfig();
if (!config.DATABASE_URL) throw new Error('workerProcess needs DATABASE_URL');
const log = createLogger(config.LOG_LEVEL, 'test-worker');
const database = Database.fromUrl(config.DATABASE_URL, log, { poolSize: workerPoolSize(config) });
const worker = await SlipwayWorker.start(database, config, log);
process.send?.({ ready: worker.id });

/** How long a clean stop may take, beyond the shutdown grace period, before the process just exits (its database may be gone too). */
const STOP_DEADLINE_MS = config.SLIPWAY_SHUTDOWN_GRACE_MS + 10_000;

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(1), STOP_DEADLINE_MS).unref();
  worker
    .stop()
    // Past the grace period drains still hold connections: exit as slipway worker does.
    .then((clean) => (clean ? database.close() : process.exit(1)))
    .then(
      () => process.exit(0),
      (error) => {
        log.error({ err: error }, 'worker did not stop cleanly');
        process.exit(1);
      },
    );
}

process.once('SIGTERM', stop);
// Our parent went away without stopping us (a test runner killed mid-run):
// a worker nobody can stop any more must not outlive it.
process.once('disconnect', stop);
