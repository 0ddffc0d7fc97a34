import type { FastifyRequest } from 'fastify';
import type { CommandRow } from '../../migrations/schema.ts';
import { attachCallback } from '../callbacks/attachCallback.ts';
import type { CallbackRequest } from '../callbacks/CallbackRequest.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/Database.ts';
import { InvalidInputError } from '../domain/errors.ts';
import { withTransaction } from '../db/withTransaction.ts';
import { appendInTransaction, type AppendResult, QueueFullError } from '../queue/appendCommand.ts';
import { cancelCommandById } from '../queue/cancelCommand.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { findLease } from '../read/leases.ts';
import type { ApiContext } from './ApiContext.ts';
import { actorOf, assertMayTouch, callerOf } from './auth/authenticate.ts';

/** What a caller asks of an object: the API's command body, and the web UI's button form. */
export interface CommandRequest {
  readonly kind: string;
  readonly reason?: string;
  readonly version?: number;
  readonly payload?: Record<string, unknown>;
  readonly callback?: CallbackRequest;
}

/**
 * Queues a command a caller asked for: the one path behind the API's command
 * POSTs and the web UI's buttons, so both check ownership and backpressure
 * the same way and both coalesce a duplicate release into the command
 * already in flight.
 *
 * The common request (no ownership to check, no callback, not inside an
 * idempotent request's transaction) is ONE statement, the append with its
 * queue-depth check (slipway_append_within), and goes through the
 * AppendBatcher, which sends it together with other requests' appends. The
 * rest run in one transaction (withTransaction), joining the caller's if
 * `db` is one.
 */
export async function requestCommand(
  db: Db,
  context: ApiContext,
  request: FastifyRequest,
  target: ObjectRef,
  body: CommandRequest,
): Promise<AppendResult> {
  const caller = callerOf(request);
  // Only a caller limited to its own leases needs the holder (a missing lease is a 404 either way).
  const checksOwner = target.kind === 'lease' && caller.reach === 'own';
  await context.backpressure.assertBacklogRoom(db);
  const appendRequest = { target, kind: body.kind, version: body.version, payload: body.payload, actor: actorOf(request, body.reason) };
  const options = { fromOutside: true, queueLimit: context.backpressure.queueDepth };
  const append = async (trx: Db) => {
    if (checksOwner) assertMayTouch(caller, (await findLease(trx, target.id)).holder, 'leases');
    const result = await appendInTransaction(trx, appendRequest, options);
    // In the append's transaction: a refused URL leaves no command behind, and a
    // duplicate that coalesced gets its callback on the command it joined.
    if (body.callback) await attachRequestedCallback(trx, result.command.id, body.callback, context.config);
    return result;
  };
  try {
    return await (checksOwner || body.callback || db.isTransaction ? withTransaction(db, append) : context.appends.append(appendRequest, options));
  } catch (error) {
    throw error instanceof QueueFullError ? context.backpressure.queueFull(error) : error;
  }
}

/** Cancels a queued command for a caller (who, with an `own` grant, must have issued it): the API's cancel and the web UI's button. */
export function requestCancel(db: Db, request: FastifyRequest, commandId: number, reason: string | undefined): Promise<CommandRow> {
  return cancelCommandById(db, commandId, actorOf(request, reason), (command) => assertMayTouch(callerOf(request), command.issued_by, 'commands'));
}

/** Attaches a request's callback; a refused URL names its field as every other body field (`body.callback.url`). */
async function attachRequestedCallback(trx: Db, commandId: number, callback: CallbackRequest, config: Config): Promise<void> {
  try {
    await attachCallback(trx, commandId, callback.url, config.SLIPWAY_CALLBACK_ALLOWED_HOSTS);
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    throw new InvalidInputError(error.message, { ...error.details, field: `body.${String(error.details.field)}` });
  }
}
