import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { BlueprintState } from '../../domain/lifecycle.ts';
import { createBlueprintInTransaction } from '../../objects/createBlueprint.ts';
import { setBlueprintState, updateBlueprint } from '../../objects/updateBlueprint.ts';
import { findBlueprint, listBlueprints, readBlueprintDetail } from '../../read/blueprints.ts';
import { readOrphans } from '../../read/orphans.ts';
import { readHistory } from '../../read/objectHistory.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf } from '../auth/authenticate.ts';
import { OPERATIONS } from '../contract.ts';
import { runPost } from '../respond.ts';
import { withTransaction } from '../../db/withTransaction.ts';
import { blueprintDetailOf, blueprintOf, historyOf, listedBlueprintOf, orphanOf, pageOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';

/** The state changes a blueprint takes over the API, as data: operation → state. */
const STATE_CHANGES = [
  [OPERATIONS.disableBlueprint, 'disabled'],
  [OPERATIONS.enableBlueprint, 'enabled'],
  [OPERATIONS.archiveBlueprint, 'archived'],
] as const satisfies ReadonlyArray<readonly [unknown, BlueprintState]>;

export async function blueprintRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();

  typed.route({
    ...routeOf(OPERATIONS.createBlueprint),
    handler: async (request, reply) => {
      await runPost(context, request, reply, async (db) => {
        const blueprint = await withTransaction(db, (trx) => createBlueprintInTransaction(trx, request.body, actorOf(request)));
        return { response: { status: 201, headers: { location: `/v1/blueprints/${blueprint.id}` }, body: blueprintOf(blueprint) } };
      });
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.listBlueprints),
    handler: async (request) => pageOf(await listBlueprints(db, request.query), listedBlueprintOf),
  });

  typed.route({
    ...routeOf(OPERATIONS.getBlueprint),
    handler: async (request) => {
      const blueprint = await readBlueprintDetail(db, request.params.ref);
      return { blueprint: blueprintDetailOf(blueprint), ...historyOf(await readHistory(db, { kind: 'blueprint', id: blueprint.id })) };
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.listOrphans),
    handler: async (request) => {
      const blueprint = await findBlueprint(db, request.params.ref);
      return { blueprint: blueprint.name, orphans: (await readOrphans(db, blueprint.id)).map(orphanOf) };
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.updateBlueprint),
    handler: async (request) =>
      blueprintOf(await withTransaction(db, (trx) => updateBlueprint(trx, request.params.ref, request.body, actorOf(request)))),
  });

  for (const [operation, state] of STATE_CHANGES) {
    typed.route({
      ...routeOf(operation),
      handler: async (request, reply) => {
        await runPost(context, request, reply, async (db) => {
          const blueprint = await withTransaction(db, (trx) => setBlueprintState(trx, request.params.ref, state, actorOf(request)));
          return { response: { status: 200, headers: {}, body: blueprintOf(blueprint) } };
        });
      },
    });
  }
}
