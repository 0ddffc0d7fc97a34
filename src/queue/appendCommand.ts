import { CompiledQuery, type RawBuilder, sql } from 'kysely';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { appendedKind, commandKindSpec, COMMAND_KINDS, schemaOf, versionFor, versionsOf } from '../domain/commandKinds.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError } from '../domain/errors.ts';
import { statesAccepting } from '../domain/lifecycle.ts';
import { recordAppended } from '../metrics/metrics.ts';
import { afterCommit } from '../db/afterCommit.ts';
import { PREPARED_MARK } from '../db/PreparingClient.ts';
import { commandColumnsText } from '../db/rowColumns.ts';
import { admit } from './admissionChecks.ts';
import { signalWorkersQuietly } from './wakeSignal.ts';
import { describeObject, type ObjectRef } from '../db/objectTables.ts';

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
 * From outside (CLI, API, collector): validates the kind, version and payload
 * (and what the payload must satisfy of its target, see admissionChecks),
 * checks the target exists and that its state accepts the command (refusing
 * an impossible one with a CommandRejectedError that says why), coalesces
 * duplicates, and writes the command and its wake-up in one transaction.
 */
export async function appendCommand(db: Db, request: AppendRequest): Promise<AppendResult> {
  // No explicit transaction: the append is one statement (slipway_append_command),
  // which PostgreSQL runs atomically on its own.
  return appendInTransaction(db, request, { fromOutside: true });
}

/**
 * The same, inside a caller's transaction. Drains use it for follow-up
 * commands (`fromOutside: false`): messages between objects are always
 * delivered, and the receiver's handler decides what they mean in its state.
 * `wake: false` skips the wake-up: a drain wakes all its follow-ups' objects
 * together at the end of its commit (see commitOutcome).
 */
export async function appendInTransaction(trx: Db, request: AppendRequest, options: AppendOptions): Promise<AppendResult> {
  const statement = appendStatement(request, options);
  if (options.fromOutside) await admit(trx, request);
  const { rows } = await trx.executeQuery(statement);
  const result = await appendResult(trx, request, options, rows);
  if (options.wake !== false && (!result.coalesced || broughtForward(result.command, request))) await signalAfterCommit(trx, request.target, options);
  return result;
}

/** Whether the command a request coalesced into was queued for later than the request asked: the append brought it forward (slipway_append_command). */
function broughtForward(into: CommandRow, request: AppendRequest): boolean {
  return new Date(into.not_before).getTime() > (request.notBefore ?? new Date()).getTime();
}

/**
 * Tells the workers of the new command once it has committed: after the
 * caller's transaction (withTransaction), or at once after an append that
 * was its own statement. A drain's appends (not from outside, on the
 * drain's connection) signal nothing: the drain takes what it woke itself.
 */
async function signalAfterCommit(trx: Db, target: ObjectRef, options: AppendOptions): Promise<void> {
  if (trx.isTransaction || options.fromOutside) await signalWorkersOnCommit(trx, target);
}

/**
 * Signals the workers after the caller's transaction commits (one signal
 * for all of its appends, naming none), or now, naming `target`, if `db` is
 * not in one (its statement has committed).
 */
export async function signalWorkersOnCommit(db: Db, target: ObjectRef): Promise<void> {
  if (db.isTransaction) afterCommit(db, 'wake', signalWorkersQuietly);
  else await signalWorkersQuietly(db, [target]);
}

/**
 * The append as a statement of its own, answering with the rows
 * appendResult reads. Prepared on each connection (PreparingClient):
 * parsing and planning a statement this small is a large share of its
 * server work, and an append is the most frequent statement there is.
 *
 * Its text is fixed (one per function) and its values are the call's
 * arguments in order, so nothing is compiled per append: building the same
 * text from a Kysely template at every call is work an API server under a
 * stream of releases would repeat for nothing.
 */
export function appendStatement(request: AppendRequest, options: AppendOptions): CompiledQuery<AppendedRow> {
  const args = appendArguments(request, options, validatedAppend(request, options));
  return options.queueLimit === undefined
    ? CompiledQuery.raw(APPEND_TEXT, args)
    : CompiledQuery.raw(APPEND_WITHIN_TEXT, [options.queueLimit, ...args]);
}

/**
 * The types of slipway_append_command's arguments, in its order
 * (appendArguments): the one list that appendStatement's text, the
 * batch's (appendBatchStatement) and appendCall's template are written from.
 */
const ARGUMENT_TYPES = [
  'text',
  'bigint',
  'text[]',
  'text',
  'integer',
  'jsonb',
  'text',
  'text',
  'text',
  'text',
  'text',
  'text',
  'bigint',
  'text',
  'timestamptz',
  'text',
] as const;
/** Where the payload is among them: appendCall may extend it with ids the same statement makes. */
const PAYLOAD_ARGUMENT = 5;

/** slipway_append_command's arguments for `request`, in its order (ARGUMENT_TYPES), the payload as its JSON text. */
function appendArguments(request: AppendCallRequest, options: AppendOptions, validated: ValidatedAppend): unknown[] {
  const { target, actor } = request;
  const { kind } = validated;
  return [
    target.kind,
    target.id,
    options.fromOutside ? statesAccepting(target.kind, kind) : null,
    kind,
    validated.version,
    JSON.stringify(validated.payload),
    actor.issuedBy,
    actor.source,
    actor.reason ?? null,
    actor.requestId ?? null,
    actor.clientAddress ?? null,
    actor.userAgent ?? null,
    request.causedBy ?? null,
    validated.dedupKey,
    request.notBefore?.toISOString() ?? null,
    options.wake === false ? null : WAKE,
  ];
}

/** One append of a batch (appendBatchStatement): its queue limit and slipway_append_command's arguments, validated. */
export type BatchedAppend = readonly unknown[];

/** `request` validated for a batch: throws InvalidInputError as appendStatement does, before it joins one. */
export function batchedAppend(request: AppendRequest, options: AppendOptions): BatchedAppend {
  return [options.queueLimit ?? null, ...appendArguments(request, options, validatedAppend(request, options))];
}

/**
 * Many appends as ONE statement, for the AppendBatcher: a lateral call of
 * slipway_append_within per append, in order (PostgreSQL calls it once per
 * row of the arrays, in their order, and each call sees what the ones
 * before it wrote, so a duplicate coalesces into the command an earlier
 * row inserted), each row of the answer numbered with its append's place
 * (from 1). An append without a queue limit passes null, which refuses
 * nothing (the depth check then counts the object's whole queue; the
 * batcher's one caller, the API, always passes its limit). The accepted
 * states travel as comma-separated text, as an array of arrays must be
 * rectangular.
 *
 * Why one statement rather than one per append in the batch's transaction:
 * each statement of a batch cost the server its own parse of the EXECUTE and
 * executor start, and the server's client its own row description and
 * result, for a row or two each.
 */
export function appendBatchStatement(appends: readonly BatchedAppend[]): CompiledQuery<AppendedRow & { n: number }> {
  const columns = BATCH_COLUMNS.map((type, i) => appends.map((append) => (type === 'text[]' ? joinedStates(append[i]) : append[i])));
  return CompiledQuery.raw(BATCH_TEXT, columns);
}

/** A batch's columns: the queue limit, then the arguments. */
const BATCH_COLUMNS = ['integer', ...ARGUMENT_TYPES] as const;
const joinedStates = (states: unknown) => (states === null ? null : (states as string[]).join(','));
// Prepared by the batcher's simple query (preparedText.ts).
const BATCH_TEXT = `select u.n::int as n, f.part, f.object_state, ${commandColumnsText('(f.cmd)')}
  from unnest(${BATCH_COLUMNS.map((type, i) => `$${i + 1}::${type === 'text[]' ? 'text' : type}[]`).join(', ')})
    with ordinality as u(${BATCH_COLUMNS.map((_, i) => `a${i}`).join(', ')}, n)
  cross join lateral slipway_append_within(${BATCH_COLUMNS.map((type, i) => (type === 'text[]' ? `string_to_array(u.a${i}, ',')` : `u.a${i}`)).join(', ')}) as f
  order by u.n`;

/** The function an append calls: behind a queue limit, slipway_append_within (src/db/functions/) checks the depth first, in the same statement. */
const appendFunction = (within: boolean) => (within ? 'slipway_append_within' : 'slipway_append_command');

/** appendStatement's text for each of the two functions: the same for every append. */
function appendText(within: boolean): string {
  const first = within ? 2 : 1;
  const args = [...(within ? ['$1::int'] : []), ...ARGUMENT_TYPES.map((type, i) => `$${first + i}::${type}`)].join(', ');
  return `${PREPARED_MARK} select f.part, f.object_state, ${commandColumnsText('(f.cmd)')} from ${appendFunction(within)}(${args}) as f`;
}
const APPEND_TEXT = appendText(false);
const APPEND_WITHIN_TEXT = appendText(true);

/**
 * What an append's rows mean for its caller: the command, or the typed error
 * that refuses it. `db` reads what a rejection needs to explain itself; it
 * may be outside the append's transaction (AppendBatcher), as the
 * explanation only points at a command that already did the work.
 */
export async function appendResult(db: Db, request: AppendRequest, options: AppendOptions, rows: readonly AppendedRow[]): Promise<AppendResult> {
  const { target, kind } = request;
  const parts = new Map(rows.map(({ part, object_state, ...command }) => [part, { state: object_state, command }]));
  const inserted = parts.get('inserted');
  if (inserted) {
    recordAppended(inserted.command, request.actor.source);
    return { command: inserted.command, coalesced: false, record: inserted.command };
  }
  const into = parts.get('coalesced_into');
  const record = parts.get('coalesced');
  if (into && record) return { command: into.command, coalesced: true, record: record.command };
  if (parts.has('missing')) throw new NotFoundError(target.kind, target.id);
  if (parts.has('busy')) throw new QueueFullError(target, options.queueLimit!);
  const rejected = parts.get('rejected');
  if (rejected?.state) throw await rejection(db, target, kind, rejected.state, commandKindSpec(target.kind, kind)?.dedupKey);
  throw new Error(`slipway_append_command returned no outcome for ${describeObject(target)}: ${JSON.stringify([...parts.keys()])}`);
}

/**
 * A request's kind, version and payload as validated for the append: the
 * kind it is stored as (an old name's new one, see appendedKind), its dedup
 * key, and the payload as its schema parsed it.
 */
export interface ValidatedAppend {
  readonly kind: string;
  readonly version: number;
  readonly payload: unknown;
  readonly dedupKey: string | null;
}

/**
 * The request's kind, version and payload checked against the command
 * kinds' schemas (InvalidInputError naming what is wrong); for every
 * append: one at a time (appendStatement, appendCall), in an API batch
 * (batchedAppend), or a drain's follow-ups together
 * (drain/sql/appendFollowUps.ts).
 */
export function validatedAppend(request: AppendCallRequest, options: Pick<AppendOptions, 'fromOutside'>): ValidatedAppend {
  const { target, kind } = request;
  const spec = commandKindSpec(target.kind, kind);
  if (!spec) {
    const known = Object.keys(COMMAND_KINDS[target.kind]).filter((k) => !options.fromOutside || !commandKindSpec(target.kind, k)!.internal);
    throw new InvalidInputError(`unknown command kind "${kind}" for a ${target.kind}; use one of: ${known.join(', ')}`, {
      field: 'kind',
    });
  }
  if (options.fromOutside && spec.internal) {
    throw new InvalidInputError(`"${kind}" is an internal command that Slipway issues itself; it cannot be requested`, {
      field: 'kind',
    });
  }
  const version = request.version ?? versionFor(spec, request.payload ?? {});
  const schema = schemaOf(spec, version);
  if (!schema) {
    throw new InvalidInputError(`${kind} has no version ${version}; this Slipway handles versions ${versionsOf(spec).join(', ')}`, {
      field: 'version',
    });
  }
  const parsed = schema.safeParse(request.payload ?? {});
  if (!parsed.success) {
    throw new InvalidInputError(`invalid ${kind} payload: ${describeZodIssues(parsed.error.issues, 'payload')}`, {
      field: 'payload',
    });
  }
  const stored = appendedKind(target.kind, kind);
  return { kind: stored, version, payload: parsed.data, dedupKey: commandKindSpec(target.kind, stored)!.dedupKey ?? null };
}

/**
 * An append that may name a row the same statement inserts (createLease
 * queues a new lease's first command in the statement that inserts the
 * lease): its target id may be an SQL expression, and so may the payload
 * fields in `payloadIds`, each an id (validated with a stand-in id, stored
 * as the expression's value).
 */
export type AppendCallRequest = Omit<AppendRequest, 'target'> & {
  readonly target: { readonly kind: ObjectKind; readonly id: number | RawBuilder<number> };
  readonly payloadIds?: Readonly<Record<string, RawBuilder<number>>>;
};

/** The id a payload field named in `payloadIds` is validated with: any id would do, the schema checks only that the field is one. */
const STAND_IN_ID = 1;

/**
 * The append as a call of slipway_append_command (a set-returning function:
 * use it in a FROM), after validating the kind, version and payload. With
 * no queue limit: the one statement that nests it (createLease) has none.
 */
export function appendCall(request: AppendCallRequest, options: Omit<AppendOptions, 'queueLimit'>): RawBuilder<AppendedRow> {
  const { payloadIds } = request;
  const fields = Object.entries(payloadIds ?? {});
  const checked =
    fields.length === 0
      ? request
      : { ...request, payload: { ...(request.payload as object), ...Object.fromEntries(fields.map(([field]) => [field, STAND_IN_ID])) } };
  const args = appendArguments(request, options, validatedAppend(checked, options));
  const ids = fields.map(([field, value]) => sql`jsonb_build_object(${field}::text, ${value})`);
  const values = args.map((value, i) =>
    i === PAYLOAD_ARGUMENT ? sql.join([sql`${value}::jsonb`, ...ids], sql` || `) : sql`${value}::${sql.raw(ARGUMENT_TYPES[i]!)}`,
  );
  return sql<AppendedRow>`${sql.raw(appendFunction(false))}(${sql.join(values)})`;
}

/** Any non-null text asks slipway_append_command to wake the object (it once named a graphile-worker task). */
const WAKE = 'wake';

export interface AppendOptions {
  /** From outside (CLI, API, collector): admission checks, and only kinds that are not internal. */
  readonly fromOutside: boolean;
  /** false: no wake-up (the caller wakes the object later). */
  readonly wake?: boolean;
  /** Refuse (QueueFullError, nothing written) when the object has this many commands queued or running. */
  readonly queueLimit?: number;
}

/** The target already has `limit` commands queued or running (see AppendOptions.queueLimit). */
export class QueueFullError extends Error {
  override name = 'QueueFullError';
  constructor(
    readonly target: ObjectRef,
    readonly limit: number,
  ) {
    super(`${describeObject(target)} has ${limit} commands queued or running`);
  }
}

/** One row of slipway_append_command: which part of the answer it is, and a command. */
export type AppendedRow = CommandRow & {
  part: 'inserted' | 'coalesced_into' | 'coalesced' | 'rejected' | 'missing' | 'busy';
  object_state: string | null;
};

/** Why the target's state refuses the command; points at the command that already did it, so a late duplicate learns it. */
async function rejection(trx: Db, target: ObjectRef, kind: string, state: string, dedupKey: string | undefined) {
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
  return new CommandRejectedError(
    `${describeObject(target)} is ${state}; ${kind} is accepted only when it is ${allowed.join(', ') || 'never'}` +
      (settledBy ? ` (command ${settledBy.id} already did it)` : ''),
    { target, state, kind, acceptedIn: allowed, settledBy: settledBy?.id ?? null },
  );
}

export type { ObjectKind };
