import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { pendingMigrations } from '../../read/pendingMigrations.ts';
import { slipwayVersion } from '../../version.ts';
import type { ApiContext } from '../ApiContext.ts';

/** Public probes: /healthz (the process answers) and /readyz (it can serve: database reachable and migrated, every part up). */
export async function healthRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  // The process is up, and which version it runs.
  app.get('/healthz', async () => ({ status: 'ok', version: slipwayVersion() }));

  // The process can serve: the database answers, every migration is applied, and every long-lived
  // part of the process is up (503 otherwise, saying which part is down and since when).
  app.get('/readyz', async (request, reply) => {
    const { ready, parts } = context.health.snapshot();
    const down = Object.entries(parts).filter(([, part]) => part.state === 'down');
    try {
      await sql`select 1`.execute(context.database.db);
      const pending = await pendingMigrations(context.database.db);
      if (pending.length > 0) {
        return reply.code(503).send({ status: 'not_ready', reason: `migrations not applied: ${pending.join(', ')}`, pending, parts });
      }
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'not_ready', reason: 'database unreachable', parts });
    }
    if (ready) return { status: 'ready', parts };
    const reason = down.map(([name, part]) => `${name} down since ${part.since}: ${part.reason ?? 'unknown'}`).join('; ');
    return reply.code(503).send({ status: 'not_ready', reason, parts });
  });
}
