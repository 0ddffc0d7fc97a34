import type { FastifyReply, FastifyRequest } from 'fastify';
import { afterCommitWasSent } from '../db/connectionFailure.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { ApiContext } from './ApiContext.ts';
import { callerOf } from './auth/authenticate.ts';
import { claimKey, idempotencyKeyOf, recordResponse, requestFingerprint, type StoredResponse } from './idempotency.ts';

/** What a POST's work returns: its answer now, and, for `?wait`, how to get the final one. */
export interface Accepted {
  readonly response: StoredResponse;
  /** Waits for the command tree and answers with its outcome. */
  readonly settle?: (signal: AbortSignal) => Promise<StoredResponse>;
}

/**
 * Runs a POST. With an Idempotency-Key, its work and the key's record commit
 * in ONE transaction owned here, so a key is recorded exactly when the
 * request took effect, and a failed request (4xx, nothing written) leaves
 * the key free for a corrected retry; a request repeated with its key gets
 * the recorded answer (marked `Idempotent-Replayed: true`) without running
 * again. Without one, `work` gets the pool and opens a transaction only if
 * it writes more than one statement (withTransaction): a release is then a
 * single round trip to the database.
 */
export async function runPost(
  context: ApiContext,
  request: FastifyRequest,
  reply: FastifyReply,
  work: (db: Db) => Promise<Accepted>,
): Promise<FastifyReply> {
  const key = idempotencyKeyOf(request);
  const claim = key === undefined ? undefined : { tokenId: callerOf(request).tokenId, key };
  const hours = context.config.SLIPWAY_API_IDEMPOTENCY_HOURS;
  const { db } = context.database;
  const done: { replay?: StoredResponse; accepted?: Accepted } = claim
    ? await withTransaction(db, async (trx) => {
        const replay = await claimKey(trx, claim, requestFingerprint(request), hours);
        if (replay) return { replay };
        const accepted = await work(trx);
        // Complete with its 202 as it commits: a retry after a wait cut off
        // (a lost connection, a failover) is answered at once with it.
        await recordResponse(trx, claim, accepted.response);
        return { accepted };
      })
    : { accepted: await work(db) };
  // A replay is the first answer as it was recorded: sent as stored, not serialized again through the route's schema.
  if (done.replay) return send(reply.header('idempotent-replayed', 'true').serializer(JSON.stringify), done.replay);

  const accepted = done.accepted!;
  if (!accepted.settle) return send(reply, accepted.response);
  try {
    const response = await accepted.settle(AbortSignal.any([disconnected(reply), context.stopping]));
    if (claim) await recordResponse(db, claim, response);
    return send(reply, response);
  } catch (error) {
    // The request's writes committed before the wait: a connection lost now must not read as "nothing was written".
    throw afterCommitWasSent(error);
  }
}

export function send(reply: FastifyReply, response: StoredResponse): FastifyReply {
  return reply.code(response.status).headers(response.headers).send(response.body);
}

/** Aborted when the client goes away before its answer: a wait for nobody stops. */
function disconnected(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
