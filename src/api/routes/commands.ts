import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ObjectKind } from '../../../migrations/schema.ts';
import { CallbackRequestSchema } from '../../callbacks/CallbackRequest.ts';
import { COMMAND_KINDS, type CommandKindSpec } from '../../domain/commandKinds.ts';
import { readCallbacks } from '../../read/callbacks.ts';
import { readCommandTree } from '../../read/commandTree.ts';
import { findCommand, listCommands } from '../../read/commands.ts';
import type { ApiContext } from '../ApiContext.ts';
import { requestCancel, requestCommand } from '../requestCommand.ts';
import type { Action } from '../auth/roles.ts';
import { commandAccepted, commandSettled } from '../commandAnswers.ts';
import { runPost } from '../respond.ts';
import { addRoute } from '../route.ts';
import { IdParams, PageQuery, Reason, TargetRef, WaitQuery } from '../schemas.ts';

/** The kinds a caller may request of each object (the others Slipway issues itself). */
function requestableKinds(target: ObjectKind): [string, ...string[]] {
  const kinds = Object.entries(COMMAND_KINDS[target] as Record<string, CommandKindSpec>)
    .filter(([, spec]) => !spec.internal)
    .map(([kind]) => kind);
  return kinds as [string, ...string[]];
}

/**
 * `{ kind, reason?, version?, payload?, callback? }`: the payload is checked
 * against the kind's schema when appended, the callback's host against the
 * allow-list when attached.
 */
function commandBody(target: ObjectKind) {
  return z
    .object({
      kind: z.enum(requestableKinds(target)),
      reason: Reason.optional(),
      version: z.number().int().min(1).optional(),
      payload: z.record(z.string(), z.unknown()).optional(),
      callback: CallbackRequestSchema.optional(),
    })
    .strict();
}

/** The objects that take commands over the API, as data: path, kind, what the caller's role must allow. */
export const COMMAND_TARGETS: ReadonlyArray<{ path: string; kind: ObjectKind; action: Action }> = [
  { path: 'leases', kind: 'lease', action: 'lease.command' },
  { path: 'resources', kind: 'resource', action: 'resource.command' },
  { path: 'blueprints', kind: 'blueprint', action: 'blueprint.write' },
];

const ListQuery = z
  .object({
    status: z.enum(['queued', 'running', 'done', 'failed', 'cancelled', 'coalesced']).optional(),
    kind: z.string().regex(/^[a-z_]{1,40}$/, 'expected a command kind, e.g. release').optional(),
    target: TargetRef.optional(),
    ...PageQuery,
  })
  .strict();

const CancelBody = z.object({ reason: Reason.optional() }).strict();

export async function commandRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;

  for (const { path, kind: targetKind, action } of COMMAND_TARGETS) {
    addRoute(app, {
      method: 'POST',
      url: `/v1/${path}/:id/commands`,
      summary: `queue a command on a ${targetKind} (202 + Location; 200 for a duplicate joining the one in flight; ?wait=<s> waits for it to settle)`,
      action,
      params: IdParams,
      query: WaitQuery,
      body: commandBody(targetKind),
      handler: ({ params, query, body }, request, reply) =>
        runPost(context, request, reply, async (db) => {
          const target = { kind: targetKind, id: params.id };
          const result = await requestCommand(db, context, request, target, body);
          const wait = query.wait;
          return {
            response: commandAccepted(result),
            ...(wait ? { settle: (signal: AbortSignal) => commandSettled(context, target, result, wait, signal) } : {}),
          };
        }),
    });
  }

  addRoute(app, {
    method: 'GET',
    url: '/v1/commands',
    summary: 'commands, oldest first unless order=newest, filtered by status, kind and target',
    action: 'read',
    query: ListQuery,
    handler: async ({ query }) => {
      const { status, kind, target, ...page } = query;
      return listCommands(db, { status, kind, target }, page);
    },
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/commands/:id',
    summary: 'a command, its status and outcome, the tree of commands it caused, and its callbacks with every delivery attempt',
    action: 'read',
    params: IdParams,
    handler: async ({ params }) => ({
      command: await findCommand(db, params.id),
      tree: await readCommandTree(db, params.id),
      callbacks: await readCallbacks(db, params.id),
    }),
  });

  addRoute(app, {
    method: 'POST',
    url: '/v1/commands/:id/cancel',
    summary: 'cancel a command still queued (409 once it is running or settled)',
    action: 'command.cancel',
    params: IdParams,
    body: CancelBody,
    handler: ({ params, body }, request, reply) =>
      runPost(context, request, reply, async (db) => {
        const cancelled = await requestCancel(db, request, params.id, body.reason);
        return { response: { status: 200, headers: {}, body: { command: cancelled } } };
      }),
  });
}
