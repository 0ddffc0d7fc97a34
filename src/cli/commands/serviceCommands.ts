import type { Command } from 'commander';
import { migrate } from '../../db/migrate.ts';
import { pendingMigrations } from '../../read/pendingMigrations.ts';
import { describeDatabase, describeMigrations } from '../databaseStatus.ts';
import { CliFailure, EXIT } from '../exitStatus.ts';
import { runWorker } from '../runWorker.ts';
import { withSession } from '../session.ts';

/** Long-running commands log at info unless LOG_LEVEL says otherwise. */
const SERVICE_LOG_LEVEL = 'info';

/** `start`, `worker` and `db migrate`: running Slipway and keeping its schema. */
export function addServiceCommands(program: Command): void {
  program
    .command('start')
    .description('migrate the database, then run a worker until SIGINT/SIGTERM')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async (session) => {
          const applied = await migrate(session.database, session.log);
          await runWorker(session, applied);
        },
        { logLevel: SERVICE_LOG_LEVEL },
      ),
    );

  program
    .command('worker')
    .description('run a worker (no migrations) until SIGINT/SIGTERM')
    .action((_options: unknown, command: Command) =>
      withSession(
        command,
        async (session) => {
          const pending = await pendingMigrations(session.db);
          if (pending.length > 0) {
            throw new CliFailure(
              `the database schema is not up to date (${pending.join(', ')} not applied): run \`slipway db migrate\``,
              EXIT.failed,
            );
          }
          await runWorker(session);
        },
        { logLevel: SERVICE_LOG_LEVEL },
      ),
    );

  program
    .command('db')
    .description('the database')
    .command('migrate')
    .description("bring the schema up to date (graphile-worker's, then Slipway's)")
    .action((_options: unknown, command: Command) =>
      withSession(command, async ({ database, config, log, out }) => {
        const status = { database: describeDatabase(config), applied: await migrate(database, log) };
        out.result(status, (s) => `${s.database}: ${describeMigrations(s.applied)}`);
      }),
    );
}
