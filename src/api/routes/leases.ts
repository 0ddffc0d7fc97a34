import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { checkCallbackUrl } from '../../callbacks/CallbackRequest.ts';
import { createLease } from '../../objects/createLease.ts';
import { dryRunLease, explainLease } from '../../drain/explainLease.ts';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { listLeases } from '../../read/leases.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf, assertPriorityAllowed, callerOf } from '../auth/authenticate.ts';
import { readLeaseDetail } from '../leaseDetail.ts';
import { leaseAccepted, leaseSettled, subscribedFirst } from '../commandAnswers.ts';
import { OPERATIONS } from '../contract.ts';
import { runPost } from '../respond.ts';
import { leaseOf, pageOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';

export async function leaseRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();

  typed.route({
    ...routeOf(OPERATIONS.createLease),
    handler: async (request, reply) => {
      const { reason, expiresAt, callback, ...rest } = request.body;
      const caller = callerOf(request);
      assertPriorityAllowed(caller, rest.priority);
      const input = () => ({
        ...rest,
        expiresAt: expiresAt?.toISOString(),
        holder: caller.actorName,
        team: caller.team,
        ...(callback ? { callbackUrl: checkCallbackUrl(callback.url, context.config.SLIPWAY_CALLBACK_ALLOWED_HOSTS) } : {}),
      });
      // A dry run writes nothing: no backlog to mind, nothing to wait for.
      if (request.query.dryRun) return dryRunLease(db, input(), actorOf(request, reason));
      await subscribedFirst(context, request.query.wait, (wait) =>
        runPost(context, request, reply, async (db) => {
          await context.backpressure.assertBacklogRoom(db);
          const created = await createLease(db, input(), actorOf(request, reason));
          return {
            response: leaseAccepted(created),
            ...(wait ? { settle: (signal: AbortSignal) => leaseSettled(context, created, wait, signal) } : {}),
          };
        }),
      );
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.listLeases),
    handler: async ({ query }) => {
      const blueprintId = await blueprintIdFilter(db, query.blueprint);
      return pageOf(await listLeases(db, { state: query.state, blueprintId, holder: query.holder }, query), leaseOf);
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.getLease),
    handler: ({ params }) => readLeaseDetail(db, params.id),
  });

  typed.route({
    ...routeOf(OPERATIONS.explainLease),
    handler: (request) => explainLease(db, request.params.id),
  });
}
