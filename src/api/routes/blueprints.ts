import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { takesLeases, type BlueprintState } from '../../domain/lifecycle.ts';
import { BlueprintInputSchema, createBlueprintInTransaction } from '../../objects/createBlueprint.ts';
import { BlueprintChangesSchema, setBlueprintState, updateBlueprint } from '../../objects/updateBlueprint.ts';
import { listBlueprints, readBlueprintDetail } from '../../read/blueprints.ts';
import { readHistory } from '../../read/objectHistory.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf } from '../auth/authenticate.ts';
import { runPost } from '../respond.ts';
import { withTransaction } from '../../db/withTransaction.ts';
import { addRoute } from '../route.ts';
import { BlueprintParams, PageQuery } from '../schemas.ts';

/** The state changes a blueprint takes over the API, as data: path segment → state. */
const STATE_CHANGES: Readonly<Record<string, BlueprintState>> = { disable: 'disabled', enable: 'enabled' };

export async function blueprintRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;

  addRoute(app, {
    method: 'POST',
    url: '/v1/blueprints',
    summary: 'create a blueprint (201 + Location)',
    action: 'blueprint.write',
    body: BlueprintInputSchema,
    handler: ({ body }, request, reply) =>
      runPost(context, request, reply, async (db) => {
        const blueprint = await withTransaction(db, (trx) => createBlueprintInTransaction(trx, body, actorOf(request)));
        return { response: { status: 201, headers: { location: `/v1/blueprints/${blueprint.id}` }, body: blueprint } };
      }),
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/blueprints',
    summary: 'blueprints, oldest first unless order=newest',
    action: 'read',
    query: z.object(PageQuery).strict(),
    handler: async ({ query }) => listBlueprints(db, query),
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/blueprints/:ref',
    summary: "a blueprint (by id or name) with its usage, queue and timeline",
    action: 'read',
    params: BlueprintParams,
    handler: async ({ params }) => {
      const blueprint = await readBlueprintDetail(db, params.ref);
      return { blueprint, ...(await readHistory(db, { kind: 'blueprint', id: blueprint.id })) };
    },
  });

  addRoute(app, {
    method: 'PATCH',
    url: '/v1/blueprints/:ref',
    summary: "change a blueprint's limits (its driver settings change through the update_settings command)",
    action: 'blueprint.write',
    params: BlueprintParams,
    body: BlueprintChangesSchema,
    handler: ({ params, body }, request) =>
      withTransaction(db, (trx) => updateBlueprint(trx, params.ref, body, actorOf(request))),
  });

  for (const [verb, state] of Object.entries(STATE_CHANGES)) {
    addRoute(app, {
      method: 'POST',
      url: `/v1/blueprints/:ref/${verb}`,
      summary: `${verb} a blueprint${takesLeases('blueprint', state) ? '' : ' (it takes no new leases; leases it has carry on)'}`,
      action: 'blueprint.write',
      params: BlueprintParams,
      body: z.object({}).strict(),
      handler: ({ params }, request, reply) =>
        runPost(context, request, reply, async (db) => {
          const blueprint = await withTransaction(db, (trx) => setBlueprintState(trx, params.ref, state, actorOf(request)));
          return { response: { status: 200, headers: {}, body: blueprint } };
        }),
    });
  }
}
