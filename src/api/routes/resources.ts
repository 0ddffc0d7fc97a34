import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { stateFilterOf } from '../../read/stateFilter.ts';
import { listResources, readResourceDetail } from '../../read/resources.ts';
import type { ApiContext } from '../ApiContext.ts';
import { addRoute } from '../route.ts';
import { BlueprintRef, IdParams, PageQuery } from '../schemas.ts';

const ListQuery = z
  .object({
    state: stateFilterOf('resource').optional(),
    blueprint: BlueprintRef.optional(),
    ...PageQuery,
  })
  .strict();

export async function resourceRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;

  addRoute(app, {
    method: 'GET',
    url: '/v1/resources',
    summary: 'resources, oldest first unless order=newest, filtered by state (or live: all but destroyed) and blueprint',
    action: 'read',
    query: ListQuery,
    handler: async ({ query }) => {
      const blueprintId = await blueprintIdFilter(db, query.blueprint);
      return listResources(db, { state: query.state, blueprintId }, query);
    },
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/resources/:id',
    summary: "a resource's fields, slots, queue and timeline",
    action: 'read',
    params: IdParams,
    handler: async ({ params }) => ({
      resource: await readResourceDetail(db, params.id),
      ...(await readHistory(db, { kind: 'resource', id: params.id })),
    }),
  });
}
