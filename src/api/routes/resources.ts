import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { listResources, readResourceDetail } from '../../read/resources.ts';
import type { ApiContext } from '../ApiContext.ts';
import { OPERATIONS } from '../contract.ts';
import { historyOf, pageOf, resourceDetailOf, resourceOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';

export async function resourceRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();

  typed.route({
    ...routeOf(OPERATIONS.listResources),
    handler: async ({ query }) => {
      const blueprintId = await blueprintIdFilter(db, query.blueprint);
      return pageOf(await listResources(db, { state: query.state, blueprintId }, query), resourceOf);
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.getResource),
    handler: async ({ params }) => ({
      resource: resourceDetailOf(await readResourceDetail(db, params.id)),
      ...historyOf(await readHistory(db, { kind: 'resource', id: params.id })),
    }),
  });
}
