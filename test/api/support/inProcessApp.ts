import type { FastifyInstance } from 'fastify';
import { TOKEN_REVOKED_CHANNEL } from '../../../src/db/channels.ts';
import { TrustedTokens } from '../../../src/api/auth/TrustedTokens.ts';
import { apiContext, buildApp } from '../../../src/server/ApiServer.ts';
import { loadConfig } from '../../../src/config.ts';
import type { Database } from '../../../src/db/Database.ts';
import type { Logger } from '../../../src/log.ts';
import { ProcessHealth } from '../../../src/health/ProcessHealth.ts';
import { NoticeListener } from '../../../src/read/CommandNotices.ts';

/**
 * The API and web UI built in the test process on `database` and logging to
 * `log`, called with `app.inject` (no port): for a database that is down, or
 * a log the test reads. Its LISTEN connection is `listenOn`'s (a database
 * that is down has none to give); `settings` are environment settings.
 */
export async function inProcessApp(
  database: Database,
  log: Logger,
  listenOn: Database = database,
  settings: Record<string, string> = {},
): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  const config = loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: 'warn', ...settings });
  const tokens = new TrustedTokens(database.db);
  const notices = await NoticeListener.open(listenOn.pool, undefined, { [TOKEN_REVOKED_CHANNEL]: tokens.revocations });
  const context = apiContext({ database, config, notices, tokens, stopping: new AbortController().signal, health: new ProcessHealth(log) }, log);
  const app = await buildApp(context, log);
  return {
    app,
    async close() {
      await app.close();
      await notices.close();
    },
  };
}
