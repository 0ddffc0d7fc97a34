/**
 * One Slipway worker as a process of its own, for tests that need real
 * separate workers (crashes, several lock holders):
 *
 *   DATABASE_URL=... LOG_LEVEL=warn node --import tsx test/helpers/workerProcess.ts
 *
 * Configured from the environment like a real worker (SLIPWAY_* settings).
 * A test seam makes it a worker of an older build: SLIPWAY_TEST_FORGET_VERSIONS
 * (e.g. `lease.renew.2`) removes those command versions (and the upgrades to
 * them) from its kinds table before it starts, so it runs and advertises
 * only what the release before them did.
 * Tells its parent it is ready over IPC when it has one, and stops cleanly
 * (drains in progress finish, its registry row goes) on SIGTERM or when that
 * parent goes away.
 */
import { commandKindSpec } from '../../src/domain/commandKinds.ts';
import type { ObjectKind } from '../../migrations/schema.ts';
import { loadConfig } from '../../src/config.ts';
import { Database } from '../../src/db/Database.ts';
import { createLogger } from '../../src/log.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { workerPoolSize } from '../../src/worker/workerPoolSize.ts';

forgetVersions(process.env.SLIPWAY_TEST_FORGET_VERSIONS ?? '');
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

/** The test seam above: `target.kind.version`, comma-separated. */
function forgetVersions(list: string): void {
  for (const entry of list.split(',').filter(Boolean)) {
    const [target, kind, version] = entry.split('.');
    const spec = commandKindSpec(target as ObjectKind, kind!) as { versions: unknown[]; upgrades?: Record<number, unknown> } | undefined;
    // Only a kind's latest versions can be forgotten: an older build has a prefix of them.
    if (!spec || Number(version) < 2 || Number(version) > spec.versions.length) throw new Error(`SLIPWAY_TEST_FORGET_VERSIONS: no ${entry}`);
    spec.versions.length = Number(version) - 1;
    for (const from of Object.keys(spec.upgrades ?? {}).map(Number)) if (from >= Number(version) - 1) delete spec.upgrades![from];
  }
}
