import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ObjectKind } from '../../../migrations/schema.ts';
import { commandKindSpec } from '../../domain/commandKinds.ts';
import { readCallbacks } from '../../read/callbacks.ts';
import { readCommandTree } from '../../read/commandTree.ts';
import { findCommand, listCommands } from '../../read/commands.ts';
import type { ApiContext } from '../ApiContext.ts';
import { requestCancel, requestCommand } from '../requestCommand.ts';
import { commandAccepted, commandSettled, subscribedFirst } from '../commandAnswers.ts';
import { OPERATIONS } from '../contract.ts';
import { runPost } from '../respond.ts';
import { callbackOf, commandOf, pageOf, treeOf } from '../shapes.ts';
import { routeOf } from '../typedRoutes.ts';

/** The objects that take commands over the API, as data: the operation and the kind of its target. */
const COMMAND_TARGETS = [
  [OPERATIONS.queueLeaseCommand, 'lease'],
  [OPERATIONS.queueResourceCommand, 'resource'],
  [OPERATIONS.queueBlueprintCommand, 'blueprint'],
] as const satisfies ReadonlyArray<readonly [unknown, ObjectKind]>;

/**
 * The Deprecation header (RFC 9745: `@` and the day's Unix time) of a
 * request for a kind's old name, which is appended as the new one
 * (domain/commandKinds.ts, renamed); undefined for any other kind.
 */
function deprecationOf(target: ObjectKind, kind: string): string | undefined {
  const since = commandKindSpec(target, kind)?.deprecatedSince;
  return since === undefined ? undefined : `@${Date.parse(since) / 1000}`;
}

export async function commandRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;
  const typed = app.withTypeProvider<ZodTypeProvider>();

  for (const [operation, targetKind] of COMMAND_TARGETS) {
    typed.route({
      ...routeOf(operation),
      handler: async (request, reply) => {
        const { params, query, body } = request;
        const deprecation = deprecationOf(targetKind, body.kind);
        if (deprecation) reply.header('deprecation', deprecation);
        await subscribedFirst(context, query.wait, (wait) =>
          runPost(context, request, reply, async (db) => {
            const target = { kind: targetKind, id: params.id };
            const result = await requestCommand(db, context, request, target, body);
            return {
              response: commandAccepted(result),
              ...(wait ? { settle: (signal: AbortSignal) => commandSettled(context, target, result, wait, signal) } : {}),
            };
          }),
        );
      },
    });
  }

  typed.route({
    ...routeOf(OPERATIONS.listCommands),
    handler: async (request) => {
      const { status, kind, target, ...page } = request.query;
      return pageOf(await listCommands(db, { status, kind, target }, page), commandOf);
    },
  });

  typed.route({
    ...routeOf(OPERATIONS.getCommand),
    handler: async ({ params }) => ({
      command: commandOf(await findCommand(db, params.id)),
      tree: treeOf(await readCommandTree(db, params.id)),
      callbacks: (await readCallbacks(db, params.id)).map(callbackOf),
    }),
  });

  typed.route({
    ...routeOf(OPERATIONS.cancelCommand),
    handler: async (request, reply) => {
      await runPost(context, request, reply, async (db) => {
        const cancelled = await requestCancel(db, request, request.params.id, request.body.reason);
        return { response: { status: 200, headers: {}, body: { command: commandOf(cancelled) } } };
      });
    },
  });
}
