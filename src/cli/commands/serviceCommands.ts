import type { Command } from 'commander';
import type { Config } from '../../config.ts';
import { workerPoolSize } from '../../worker/workerPoolSize.ts';
import { describeDatabase, describeMigrations } from '../databaseStatus.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import { later } from '../later.ts';
import { withSession, type Session } from '../session.ts';

/**
 * Long-running commands log at info unless LOG_LEVEL says otherwise, and
 * size their pool for a worker's drains plus the API's requests (which take
 * a connection each for their short transactions; a waiting request holds
 * none: it listens on the API's one shared LISTEN connection).
 */
const SERVICE_SESSION = { logLevel: 'info', poolSize: (config: Config) => workerPoolSize(config) + API_CONNECTIONS, runsHere: true } as const;
/** `db migrate`, `db status` and `db url`: about the database itself. */
const DATABASE_SESSION = { runsHere: true } as const;
const API_CONNECTIONS = 10;

/**
 * The service itself (the API server, the worker, graphile-worker, fastify)
 * and the migrations (graphile-worker's among them) are loaded only by the
 * commands that run them: every other CLI call would otherwise pay for
 * loading them before doing anything (see docs/cli.md).
 */
const runService = later(() => import('../runService.ts'), 'runService');
const migrate = later(() => import('../../db/migrate.ts'), 'migrate');
const pendingMigrations = later(() => import('../../read/pendingMigrations.ts'), 'pendingMigrations');
const laterMigrations = later(() => import('../../read/pendingMigrations.ts'), 'laterMigrations');
const outdatedFunctions = later(() => import('../../db/applyFunctions.ts'), 'outdatedFunctions');

/** `start`, `worker`, `api`, `db migrate` and `db status`: running Slipway and keeping its schema. */
export function addServiceCommands(program: Command): void {
  program
    .command('start')
    .description('migrate the database, then run a worker and the HTTP API until SIGINT/SIGTERM')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async (session) => {
          const migrated = await migrate(session.database, session.log, { maintainTables: session.config.SLIPWAY_GC_MAINTAIN_TABLES });
          await runService(session, { worker: true, api: true, migrated });
        },
        SERVICE_SESSION,
      ),
    );

  program
    .command('worker')
    .description('run a worker (no migrations) until SIGINT/SIGTERM')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async (session) => {
          await assertMigrated(session);
          await runService(session, { worker: true, api: false });
        },
        SERVICE_SESSION,
      ),
    );

  program
    .command('api')
    .description('serve the HTTP API only (no worker, no migrations) until SIGINT/SIGTERM')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async (session) => {
          await assertMigrated(session);
          await runService(session, { worker: false, api: true });
        },
        SERVICE_SESSION,
      ),
    );

  const db = program.command('db').description('the database');
  db.command('migrate')
    .description("bring the schema up to date (graphile-worker's, then Slipway's)")
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async ({ database, config, log, out }) => {
          const status = {
            database: describeDatabase(config),
            applied: await migrate(database, log, { maintainTables: config.SLIPWAY_GC_MAINTAIN_TABLES }),
          };
          out.result(status, (s) => `${s.database}: ${describeMigrations(s.applied)}`);
        },
        DATABASE_SESSION,
      ),
    );
  db.command('status')
    .description("whether the schema and the SQL functions are this release's; exits 1, naming what differs, when not")
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async ({ db, config, out }) => {
          const later = await laterMigrations(db);
          const status = {
            database: describeDatabase(config),
            pendingMigrations: await pendingMigrations(db),
            laterMigrations: later,
            // A later release's functions are its own, not this one's to put back (docs/upgrades.md): not compared.
            outdatedFunctions: later.length > 0 ? null : await outdatedFunctions(db),
          };
          const behind = [
            ...(status.pendingMigrations.length > 0 ? [`${status.pendingMigrations.join(', ')} not applied`] : []),
            ...(status.outdatedFunctions?.length ? [`functions ${status.outdatedFunctions.join(', ')} differ from this release's`] : []),
          ];
          if (behind.length > 0) {
            throw new CliFailure(`${status.database} is not up to date (${behind.join('; ')}): run \`slipway db migrate\``, EXIT.failed, {
              code: 'not_up_to_date',
              details: status,
            });
          }
          out.result(status, (s) =>
            s.laterMigrations.length > 0
              ? `${s.database}: a later release's schema (${s.laterMigrations.join(', ')} applied, unknown to this one)`
              : `${s.database}: up to date`,
          );
        },
        DATABASE_SESSION,
      ),
    );
  db.command('url')
    .description('print the connection URL of the database (password included), for psql and other tools: psql "$(slipway db url)"')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async ({ database, out }) => {
          // An embedded server this command had to start stops again when it ends: the URL is only good while Slipway runs.
          if (database.startedEmbeddedServer) {
            out.warn('the embedded PostgreSQL was not running; it stops again now, so start Slipway (npm start) before using this URL');
          }
          out.result({ url: database.url }, (s) => s.url);
        },
        DATABASE_SESSION,
      ),
    );
}

/** `worker` and `api` do not migrate: they refuse a schema that is behind, naming the fix. */
async function assertMigrated(session: Session): Promise<void> {
  const pending = await pendingMigrations(session.db);
  if (pending.length > 0) {
    throw new CliFailure(`the database schema is not up to date (${pending.join(', ')} not applied): run \`slipway db migrate\``, EXIT.failed);
  }
}
