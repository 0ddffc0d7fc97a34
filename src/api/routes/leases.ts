import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createLeaseInTransaction, leaseBodySchema } from '../../objects/createLease.ts';
import { blueprintIdFilter } from '../../read/blueprints.ts';
import { findLease, listLeases } from '../../read/leases.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { stateFilterOf } from '../../read/stateFilter.ts';
import type { ApiContext } from '../ApiContext.ts';
import { actorOf, callerOf } from '../auth/authenticate.ts';
import { leaseAccepted, leaseSettled } from '../commandAnswers.ts';
import { runPost } from '../respond.ts';
import { withTransaction } from '../../db/withTransaction.ts';
import { addRoute } from '../route.ts';
import { BlueprintRef, IdParams, NumericId, PageQuery, Reason, WaitQuery } from '../schemas.ts';

/**
 * A lease request: the shared lease body (with its expiry fields and rules)
 * without a holder, which is always the calling token's actor
 * (`token:<name>`), so a `user` token can later release what it created.
 * No `callback`: a lease's first command can settle while the lease still
 * waits for capacity (see docs/api.md, "Asynchronous semantics"), so a callback could not say what a
 * caller wants to know; `?wait` and polling the lease do.
 */
const CreateBody = leaseBodySchema({
  /** The blueprint's name, or its id. */
  blueprint: z.union([z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'expected a blueprint name'), NumericId]),
  attributes: z.record(z.string().max(100), z.unknown()).optional(),
  reason: Reason.optional(),
});

const ListQuery = z
  .object({
    state: stateFilterOf('lease').optional(),
    blueprint: BlueprintRef.optional(),
    holder: z.string().min(1).max(200).optional(),
    ...PageQuery,
  })
  .strict();

export async function leaseRoutes(app: FastifyInstance, context: ApiContext): Promise<void> {
  const { db } = context.database;

  addRoute(app, {
    method: 'POST',
    url: '/v1/leases',
    summary: 'request a lease (202 + Location of its first command; ?wait=<s> waits until it is active or has failed)',
    action: 'lease.create',
    query: WaitQuery,
    body: CreateBody,
    handler: ({ query, body }, request, reply) =>
      runPost(context, request, reply, async (db) => {
        await context.backpressure.assertBacklogRoom(db);
        const { reason, expiresAt, ...rest } = body;
        const input = { ...rest, expiresAt: expiresAt?.toISOString(), holder: callerOf(request).actorName };
        const created = await withTransaction(db, (trx) => createLeaseInTransaction(trx, input, actorOf(request, reason)));
        const wait = query.wait;
        return {
          response: leaseAccepted(created),
          ...(wait ? { settle: (signal: AbortSignal) => leaseSettled(context, created, wait, signal) } : {}),
        };
      }),
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/leases',
    summary: 'leases, oldest first unless order=newest, filtered by state (or live: all but destroyed), blueprint and holder',
    action: 'read',
    query: ListQuery,
    handler: async ({ query }) => {
      const blueprintId = await blueprintIdFilter(db, query.blueprint);
      return listLeases(db, { state: query.state, blueprintId, holder: query.holder }, query);
    },
  });

  addRoute(app, {
    method: 'GET',
    url: '/v1/leases/:id',
    summary: "a lease's fields, its queue and its timeline",
    action: 'read',
    params: IdParams,
    handler: async ({ params }) => ({
      lease: await findLease(db, params.id),
      ...(await readHistory(db, { kind: 'lease', id: params.id })),
    }),
  });
}
