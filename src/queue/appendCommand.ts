import { sql } from 'kysely';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { commandKindSpec, latestVersion, COMMAND_KINDS } from '../domain/commandKinds.ts';
import {
  CommandRejectedError,
  describeZodIssues,
  InvalidInputError,
  NotFoundError,
} from '../domain/errors.ts';
import { accepts, statesAccepting } from '../domain/lifecycle.ts';
import { describeObject, OBJECT_TABLE, type ObjectRef } from './objectTables.ts';
import { wakeObjects } from './wakeObjects.ts';

export interface AppendRequest {
  readonly target: ObjectRef;
  readonly kind: string;
  readonly version?: number;
  readonly payload?: unknown;
  readonly actor: Actor;
  readonly causedBy?: number | null;
  readonly notBefore?: Date;
}

export interface AppendResult {
  /** The command that will do the work: the new one, or the one it coalesced into. */
  readonly command: CommandRow;
  /** True when an equivalent command was already queued or running. */
  readonly coalesced: boolean;
  /** This request's own row (differs from `command` when coalesced). */
  readonly record: CommandRow;
}

/**
 * The one way to put a command on an object's queue, for every caller.
 *
 * From outside (CLI, API, collector): validates the kind, version and payload,
 * checks the target exists and that its state accepts the command (refusing
 * an impossible one with a CommandRejectedError that says why), coalesces
 * duplicates, and writes the command and its wake-up in one transaction.
 */
export async function appendCommand(db: Db, request: AppendRequest): Promise<AppendResult> {
  return db.transaction().execute((trx) => appendInTransaction(trx, request, { fromOutside: true }));
}

/**
 * The same, inside a caller's transaction. Drains use it for follow-up
 * commands (`fromOutside: false`): messages between objects are always
 * delivered, and the receiver's handler decides what they mean in its state.
 * `wake: false` skips the wake-up: a drain wakes all its follow-ups' objects
 * together at the end of its commit (see commitOutcome).
 */
export async function appendInTransaction(
  trx: Db,
  request: AppendRequest,
  options: { fromOutside: boolean; wake?: boolean },
): Promise<AppendResult> {
  const { target, kind } = request;
  const spec = commandKindSpec(target.kind, kind);
  if (!spec) {
    const known = Object.keys(COMMAND_KINDS[target.kind]).filter(
      (k) => !options.fromOutside || !commandKindSpec(target.kind, k)!.internal,
    );
    throw new InvalidInputError(`unknown command kind "${kind}" for a ${target.kind}; use one of: ${known.join(', ')}`, {
      field: 'kind',
    });
  }
  if (options.fromOutside && spec.internal) {
    throw new InvalidInputError(`"${kind}" is an internal command that Slipway issues itself; it cannot be requested`, {
      field: 'kind',
    });
  }
  const version = request.version ?? latestVersion(spec);
  const schema = spec.versions[version];
  if (!schema) {
    throw new InvalidInputError(
      `${kind} has no version ${version}; this Slipway handles versions ${Object.keys(spec.versions).join(', ')}`,
      { field: 'version' },
    );
  }
  const parsed = schema.safeParse(request.payload ?? {});
  if (!parsed.success) {
    throw new InvalidInputError(`invalid ${kind} payload: ${describeZodIssues(parsed.error.issues, 'payload')}`, {
      field: 'payload',
    });
  }

  if (options.fromOutside) await assertAccepted(trx, target, kind, spec.dedupKey);

  const row = {
    target_kind: target.kind,
    target_id: target.id,
    kind,
    version,
    payload: JSON.stringify(parsed.data),
    issued_by: request.actor.issuedBy,
    source: request.actor.source,
    reason: request.actor.reason ?? null,
    request_id: request.actor.requestId ?? null,
    client_address: request.actor.clientAddress ?? null,
    user_agent: request.actor.userAgent ?? null,
    caused_by: request.causedBy ?? null,
    dedup_key: spec.dedupKey ?? null,
    ...(request.notBefore ? { not_before: request.notBefore } : {}),
  };

  if (spec.dedupKey) {
    // Loop: the in-flight command we collided with may settle before we read
    // it, in which case our insert can go through on the next try.
    for (;;) {
      const inserted = await trx
        .insertInto('commands')
        .values(row)
        .onConflict((oc) =>
          oc
            .columns(['target_kind', 'target_id', 'dedup_key'])
            .where('dedup_key', 'is not', null)
            .where('status', 'in', ['queued', 'running'])
            .doNothing(),
        )
        .returningAll()
        .executeTakeFirst();
      if (inserted) {
        if (options.wake !== false) await wakeObjects(trx, [target], request.notBefore);
        return { command: inserted, coalesced: false, record: inserted };
      }
      const existing = await trx
        .selectFrom('commands')
        .selectAll()
        .where('target_kind', '=', target.kind)
        .where('target_id', '=', target.id)
        .where('dedup_key', '=', spec.dedupKey)
        .where('status', 'in', ['queued', 'running'])
        .executeTakeFirst();
      if (!existing) continue;
      const record = await trx
        .insertInto('commands')
        .values({
          ...row,
          dedup_key: null,
          status: 'coalesced',
          coalesced_into: existing.id,
          message: `coalesced into command ${existing.id}, already ${existing.status}`,
          finished_at: sql<Date>`now()`,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return { command: existing, coalesced: true, record };
    }
  }

  const inserted = await trx.insertInto('commands').values(row).returningAll().executeTakeFirstOrThrow();
  if (options.wake !== false) await wakeObjects(trx, [target], request.notBefore);
  return { command: inserted, coalesced: false, record: inserted };
}

async function assertAccepted(trx: Db, target: ObjectRef, kind: string, dedupKey: string | undefined) {
  // FOR SHARE: a drain locks the row before it commits a state change (see
  // lockObjectRow), so the state we check stays the state until we commit.
  // Without it, a release could read "active", the in-flight release commit,
  // and ours be queued as a second one instead of joining it or being refused.
  const object = await trx
    .selectFrom(OBJECT_TABLE[target.kind])
    .select('state')
    .where('id', '=', target.id)
    .forShare()
    .executeTakeFirst();
  if (!object) throw new NotFoundError(target.kind, target.id);
  if (accepts(target.kind, object.state, kind)) return;

  // Point at the command that already did this, so a late duplicate learns it.
  const settledBy = dedupKey
    ? await trx
        .selectFrom('commands')
        .select(['id', 'status'])
        .where('target_kind', '=', target.kind)
        .where('target_id', '=', target.id)
        .where('dedup_key', '=', dedupKey)
        .where('status', '=', 'done')
        .orderBy('id', 'desc')
        .executeTakeFirst()
    : undefined;
  const allowed = statesAccepting(target.kind, kind);
  throw new CommandRejectedError(
    `${describeObject(target)} is ${object.state}; ${kind} is accepted only when it is ${allowed.join(', ') || 'never'}` +
      (settledBy ? ` (command ${settledBy.id} already did it)` : ''),
    { target, state: object.state, kind, acceptedIn: allowed, settledBy: settledBy?.id ?? null },
  );
}

export type { ObjectKind };
