import path from 'node:path';
import { ensureFirstAdminToken, FIRST_ADMIN_TOKEN_FILE } from '../api/auth/firstAdminToken.ts';
import { ApiServer } from '../server/ApiServer.ts';
import type { Config } from '../config.ts';
import { warnAboutServerSettings } from '../db/serverChecks.ts';
import { ProcessHealth } from '../health/ProcessHealth.ts';
import { slipwayVersion } from '../version.ts';
import { MetricsListener } from '../worker/MetricsListener.ts';
import { SlipwayWorker } from '../worker/SlipwayWorker.ts';
import { describeDatabase, describeMigrations } from './databaseStatus.ts';
import { CliFailure, EXIT } from './exitStatus.ts';
import { findPortHolder } from './portHolder.ts';
import type { Session } from './session.ts';
import { untilInterrupted } from './shutdown.ts';
import { formatDuration } from '../domain/durations.ts';

/** What one process runs: a worker, the HTTP API, or both (`slipway start`). */
export interface ServiceParts {
  readonly worker: boolean;
  readonly api: boolean;
  /** What `start` migrated first (undefined when it did not migrate). */
  readonly migrated?: readonly string[];
}

/**
 * Runs a worker and/or the HTTP API until told to stop (see shutdown.ts),
 * then stops them cleanly: the API stops taking requests (waiting ones
 * answer with what they have), drains in progress finish, and the worker
 * leaves the registry. The API starts first: a port in use then stops the
 * command before a worker has registered.
 */
export async function runService(session: Session, parts: ServiceParts): Promise<void> {
  const { database, config, log, out } = session;
  // One account of the process's parts, so that `slipway start`'s /readyz also says when its worker's runner is down.
  const health = new ProcessHealth(log);
  await warnAboutServerSettings(database.db, log, config.SLIPWAY_GC_MAINTAIN_TABLES);
  const api = parts.api ? await startApi(session, health) : undefined;
  // With an API, /metrics is on its port; a worker alone serves it on a port of its own, when given one.
  const metricsPort = api ? undefined : config.SLIPWAY_METRICS_PORT;
  const metrics = metricsPort === undefined ? undefined : await MetricsListener.start(database, config, metricsPort, log);
  const worker = parts.worker ? await SlipwayWorker.start(database, config, log, health) : undefined;
  // The embedded default's first start makes an admin token, so the API is usable at once.
  const tokenFile = api && !config.DATABASE_URL ? await ensureFirstAdminToken(database.db, config.homeDir) : undefined;
  const status = {
    version: slipwayVersion(),
    database: describeDatabase(config),
    ...(parts.migrated ? { migrationsApplied: parts.migrated } : {}),
    ...(worker ? { worker: worker.id, concurrency: config.SLIPWAY_WORKER_CONCURRENCY } : {}),
    ...(api ? { api: api.url, web: `${api.url}/`, metrics: `${api.url}/metrics` } : {}),
    ...(metrics ? { metrics: metrics.url } : {}),
    ...(tokenFile ? { adminTokenFile: tokenFile } : {}),
  };
  out.result(status, (s) =>
    [
      `database: ${s.database}`,
      ...(parts.migrated ? [`migrations: ${describeMigrations(parts.migrated)}`] : []),
      ...(worker ? [`worker ${worker.id} running (concurrency ${config.SLIPWAY_WORKER_CONCURRENCY})`] : []),
      ...(api ? [`HTTP API on ${api.url} (see ${api.url}/v1/openapi.json)`] : []),
      ...(metrics ? [`metrics on ${metrics.url}`] : []),
      ...(tokenFile ? [`first admin token written to ${path.relative(process.cwd(), tokenFile)} (mode 0600; shown nowhere else)`] : []),
      ...(api ? [signInHint(api.url, tokenFile ?? (config.DATABASE_URL ? undefined : path.join(config.homeDir, FIRST_ADMIN_TOKEN_FILE)))] : []),
      `slipway ${s.version}; Ctrl-C stops it`,
    ].join('\n'),
  );
  await untilInterrupted();
  const reason = String(session.interrupted.reason);
  if (api) {
    out.progress(`stopping the HTTP API (${reason})`);
    await api.stop();
  }
  await metrics?.stop();
  if (worker) {
    out.progress(`stopping worker ${worker.id} (${reason}): finishing drains in progress`);
    if (!(await worker.stop())) {
      out.progress(
        `worker ${worker.id}: the shutdown grace period (SLIPWAY_SHUTDOWN_GRACE_MS, ${formatDuration(config.SLIPWAY_SHUTDOWN_GRACE_MS)}) is over with drains in flight; exiting, and other workers take their objects over`,
      );
      // Closing the pool would wait for those drains: leave now, as a crash would.
      process.exit(EXIT.failed);
    }
    out.progress('worker stopped');
  }
}

/** Starts the HTTP API; a port already in use fails in one line naming the process that has it. */
async function startApi({ database, config, log }: Session, health: ProcessHealth): Promise<ApiServer> {
  try {
    return await ApiServer.start(database, config, log, health);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    throw new CliFailure(await portInUse(config), EXIT.failed);
  }
}

async function portInUse({ SLIPWAY_API_HOST: host, SLIPWAY_API_PORT: port }: Config): Promise<string> {
  const holder = await findPortHolder(port);
  const who = holder ? `pid ${holder.pid} (${holder.command})` : 'another process';
  return `port ${port} on ${host} is already in use by ${who}: stop it, or set SLIPWAY_API_PORT to another port (0 picks a free one)`;
}

/** How to sign in to the web UI: with any API token, e.g. the first admin token when the embedded default made one. */
function signInHint(url: string, adminTokenFile: string | undefined): string {
  const token = adminTokenFile
    ? `the admin token in ${path.relative(process.cwd(), adminTokenFile)} (if it is still there), or one from \`slipway token create\``
    : 'a token from `slipway token create --name <you> --role operator`';
  return `web UI on ${url}/ : sign in with ${token}`;
}
