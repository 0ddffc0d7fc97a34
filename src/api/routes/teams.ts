import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { removeQuota, setQuota, setTeam } from '../../objects/teams.ts';
import { listTeams, readTeam } from '../../read/teams.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf } from '../auth/authenticate.ts';
import { OPERATIONS } from '../contract.ts';
import { teamDetailOf, teamOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';
import { runPost } from '../respond.ts';
import type { Db } from '../../db/Database.ts';

/** Teams, their weights and quotas (docs/scheduling.md): read by anyone, changed by admins. */
export async function teamRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();
  /** Runs a change (with its Idempotency-Key, if sent) and answers with the team as it is after it. */
  const change = (request: FastifyRequest, reply: FastifyReply, team: string, work: (db: Db) => Promise<unknown>) =>
    runPost(context, request, reply, async (db) => {
      await work(db);
      return { response: { status: 200, headers: {}, body: teamOf(await readTeam(db, team)) } };
    });

  typed.route({
    ...routeOf(OPERATIONS.listTeams),
    handler: async () => ({ items: (await listTeams(db)).map(teamOf) }),
  });

  typed.route({
    ...routeOf(OPERATIONS.getTeam),
    handler: async ({ params }) => teamDetailOf(await readTeam(db, params.name)),
  });

  typed.route({
    ...routeOf(OPERATIONS.setTeam),
    handler: async (request, reply) =>
      change(request, reply, request.params.name, (db) => setTeam(db, { name: request.params.name, ...request.body }, actorOf(request))),
  });

  typed.route({
    ...routeOf(OPERATIONS.setQuota),
    handler: async (request, reply) =>
      change(request, reply, request.params.name, (db) => setQuota(db, { team: request.params.name, ...request.body }, actorOf(request))),
  });

  typed.route({
    ...routeOf(OPERATIONS.removeQuota),
    handler: async (request, reply) =>
      change(request, reply, request.params.name, (db) => removeQuota(db, { team: request.params.name, ...request.body }, actorOf(request))),
  });
}
