import { SlipwayWorker } from '../worker/SlipwayWorker.ts';
import { describeDatabase, describeMigrations } from './databaseStatus.ts';
import type { Session } from './session.ts';
import { untilInterrupted } from './shutdown.ts';

/**
 * Runs a worker until SIGINT or SIGTERM, then stops it cleanly: drains in
 * progress finish and the worker leaves the registry. `migrated` lists what
 * `start` applied first (undefined for a bare `worker`).
 */
export async function runWorker(session: Session, migrated?: readonly string[]): Promise<void> {
  const { database, config, log, out } = session;
  const worker = await SlipwayWorker.start(database, config, log);
  const status = {
    database: describeDatabase(config),
    ...(migrated ? { migrationsApplied: migrated } : {}),
    worker: worker.id,
    concurrency: config.SLIPWAY_WORKER_CONCURRENCY,
  };
  out.result(status, (s) =>
    [
      `database: ${s.database}`,
      ...(migrated ? [`migrations: ${describeMigrations(migrated)}`] : []),
      `worker ${s.worker} running (concurrency ${s.concurrency}); Ctrl-C stops it`,
    ].join('\n'),
  );
  await untilInterrupted();
  out.progress(`stopping worker ${worker.id} (${String(session.interrupted.reason)}): finishing drains in progress`);
  await worker.stop();
  out.progress('worker stopped');
}
