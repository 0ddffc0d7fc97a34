import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { pendingMigrations } from '../../read/pendingMigrations.ts';
import type { ApiContext } from '../ApiContext.ts';
import { addRoute } from '../route.ts';

/** Public probes: /healthz (the process answers) and /readyz (it can serve: database reachable and migrated). */
export async function healthRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  addRoute(app, {
    method: 'GET',
    url: '/healthz',
    summary: 'the process is up',
    handler: async () => ({ status: 'ok' }),
  });

  addRoute(app, {
    method: 'GET',
    url: '/readyz',
    summary: 'the database is reachable and every migration is applied (503 otherwise, saying which)',
    handler: async (_input, request, reply) => {
      try {
        await sql`select 1`.execute(context.database.db);
        const pending = await pendingMigrations(context.database.db);
        if (pending.length === 0) return { status: 'ready' };
        return reply.code(503).send({ status: 'not_ready', reason: `migrations not applied: ${pending.join(', ')}`, pending });
      } catch (error) {
        request.log.warn({ err: error }, 'readiness check failed');
        return reply.code(503).send({ status: 'not_ready', reason: 'database unreachable' });
      }
    },
  });
}
