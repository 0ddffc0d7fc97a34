import type { CompiledQuery } from 'kysely';
import type { ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { compileOnly } from '../db/compileOnly.ts';
import { kyselyOnClient } from '../db/kyselyOnClient.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { dispositionOf, handlerOf } from './commandDisposition.ts';
import { rowAfter, runGoesOnAfter } from './commandRun.ts';
import type { Decided } from './commitOutcome.ts';
import { type CommandHandler, type HandlerContext, joinsRuns, type LockedBatch, lockedBatchOf, type Outcome, readsInTransaction } from './Handler.ts';
import type { Planned } from './laneTypes.ts';
import { commandContext, type PlanningParts } from './planCommands.ts';
import { RoundTrip, type RoundTripResults } from './roundTrip.ts';
import type { RunningMarks } from './runningMarks.ts';
import { lockVersionsStatement } from './sql/lockVersions.ts';
import { GENERIC_PLANS } from '../db/genericPlans.ts';
import { NO_SEQ_SCANS, settings } from './sql/laneTransactions.ts';

/**
 * The order a step decides its objects in: blueprints, then resources, then
 * leases. A decision writes some rows as it decides (a resource's slot
 * rows, a blueprint's waiting line) and the rest (object rows, the
 * command's status, follow-ups) only as the step commits, and the step's
 * later decisions read in its transaction: a blueprint deciding after a
 * resource would see that resource half-applied. A resource that gave a
 * slot back earlier in the step, its row not yet written, looked full to its
 * blueprint, which put the asking lease in line; and the resource had found
 * the line still empty, so offered the slot to nobody. Blueprints first
 * read only what earlier steps committed, as if they were a transaction of
 * their own before the step; resources then see the line as the
 * blueprints leave it, and offer what they free to the leases it holds.
 */
const DECISION_ORDER: Record<ObjectKind, number> = { blueprint: 0, resource: 1, lease: 2 };

/** What deciding a step needs of its lane. */
export interface DecidingLane extends PlanningParts {
  /** The lane's connection: the step's transaction, if it opens one, is on it. */
  readonly client: Parameters<typeof kyselyOnClient>[0];
  /** Marks for the contexts of commands decided in runs (which call no driver, but every context carries one). */
  newMarks(): RunningMarks;
  send<Name extends string>(trip: RoundTrip<Name>): Promise<RoundTripResults<Name>>;
}

export interface DecidedStep {
  /** Every command decided, heads first by DECISION_ORDER, each followed by the rest of its run. */
  readonly decided: readonly Decided[];
  /** Whether the step's transaction is open: a decision queried under row locks, its rows already locked and version-checked. */
  readonly inTransaction: boolean;
  /** Locks the decided objects' rows and checks their versions: the commit sends it first when the step's transaction is not open yet. */
  readonly lockVersions: CompiledQuery;
}

/**
 * Decides the planned objects' commands (not those handed off) (with the rest of their runs, if
 * `runs`) in DECISION_ORDER. If any decision queries under row locks (a
 * `querying` handler's, one whose `readsInTransaction` says so, or a
 * locked batch, see Handler.ts), it first opens the step's transaction: the
 * rows locked and version-checked, with each kind's locked batches sent just
 * before that kind's first decision. Commits nothing.
 */
export async function decideStep(lane: DecidingLane, planned: readonly Planned[], runs: boolean): Promise<DecidedStep> {
  const applying = planned.filter((p) => !p.handOff).sort((a, b) => DECISION_ORDER[a.held.ref.kind] - DECISION_ORDER[b.held.ref.kind]);
  const lockVersions = lockVersionsStatement(applying.map((p) => ({ ...p.held.ref, version: p.held.object.version })));
  const batches = lockedBatches(applying);
  // A locked batch writes (a slot row's delete): it runs in the step's transaction whatever its handler declares.
  const inTransaction =
    batches.size > 0 ||
    applying.some(
      (p) =>
        (!p.outcome && readsInTransaction(p.handler, p.ctx)) ||
        (runs && p.held.following.some((c) => readsInTransaction(handlerOf(p.held.ref.kind, c.kind)))),
    );
  const trx = kyselyOnClient(lane.client);
  // The transaction's opening goes out with the first batches, those of the first kind decided.
  // Generic plans from the start: lockVersions is the drain's own statement, prepared per connection as the commit's are.
  let unopened: (string | CompiledQuery)[] = inTransaction ? ['begin', settings(NO_SEQ_SCANS, GENERIC_PLANS), lockVersions] : [];
  const sendBatches = async (kind: ObjectKind) => {
    const due = batches.get(kind) ?? [];
    batches.delete(kind);
    if (unopened.length === 0 && due.length === 0) return;
    const trip = new RoundTrip<'batches'>().add(...unopened).read(
      'batches',
      due.flatMap((b) => b.statements),
    );
    const results = (await lane.send(trip)).get('batches');
    unopened = [];
    let n = 0;
    for (const b of due)
      b.batch.keep(
        trx,
        b.statements.map(() => results[n++]!.rows),
      );
  };
  if (applying.length > 0) await sendBatches(applying[0]!.held.ref.kind);
  const decided: Decided[] = [];
  for (const p of applying) {
    const { ref, object, head } = p.held;
    if (batches.has(ref.kind)) await sendBatches(ref.kind);
    const outcome = p.outcome ?? (await decision(trx, p.handler!, p.ctx!, ref, head.kind, p.effect));
    const first: Decided = { target: ref, object, command: head, outcome };
    decided.push(first, ...(runs ? await decideRun(lane, trx, p, first) : []));
  }
  return { decided, inTransaction, lockVersions };
}

/**
 * The commands after `p`'s head that join its run, decided in order, each
 * on the row as the one before left it (see commandRun.ts).
 */
async function decideRun(lane: DecidingLane, trx: Db, p: Planned, head: Decided): Promise<Decided[]> {
  const { ref } = p.held;
  const run: Decided[] = [];
  let last = head;
  let handler = p.handler;
  const marks = lane.newMarks();
  for (const command of p.held.following) {
    if (!runGoesOnAfter(ref.kind, last.command.kind, handler, last.outcome)) break;
    const object = rowAfter(last.object, last.outcome);
    const disposition = dispositionOf(ref, object.state, command);
    if (disposition.as === 'unknown' || (disposition.as === 'handle' && !joinsRuns(disposition.handler))) break;
    handler = disposition.as === 'handle' ? disposition.handler : undefined;
    let outcome: Outcome;
    if (disposition.as === 'settled') outcome = disposition.outcome;
    else {
      const ctx = commandContext(lane, p.held, object, command, disposition.payload, marks);
      outcome = await decision(trx, disposition.handler, ctx, ref, command.kind, undefined);
    }
    last = { target: ref, object, command, outcome };
    run.push(last);
  }
  return run;
}

/** The step's locked batches (LockedBatch), each one set of statements for all the heads whose handler declares it, by the kind of object they decide. */
function lockedBatches(applying: readonly Planned[]): Map<ObjectKind, { batch: LockedBatch; statements: readonly CompiledQuery[] }[]> {
  const byBatch = new Map<LockedBatch, Planned[]>();
  for (const p of applying) {
    const batch = lockedBatchOf(p.handler);
    if (!batch || p.outcome) continue;
    byBatch.set(batch, [...(byBatch.get(batch) ?? []), p]);
  }
  const byKind = new Map<ObjectKind, { batch: LockedBatch; statements: readonly CompiledQuery[] }[]>();
  for (const [batch, users] of byBatch) {
    const statements = batch.statements(users.map((p) => p.ctx!));
    if (statements.length === 0) continue;
    const kind = users[0]!.held.ref.kind;
    byKind.set(kind, [...(byKind.get(kind) ?? []), { batch, statements }]);
  }
  return byKind;
}

/**
 * The handler's decision, by its shape: a pure one gets no Db; a querying
 * one the step's transaction; the others that transaction if they declare
 * that they read in it (for this context), else a Db that refuses every
 * query.
 */
function decision(
  trx: Db,
  handler: CommandHandler<ObjectKind>,
  ctx: HandlerContext<ObjectKind>,
  ref: ObjectRef,
  kind: string,
  effect: unknown,
): Promise<Outcome> | Outcome {
  switch (handler.shape) {
    case 'pure':
      return handler.decide(ctx);
    case 'querying':
      return handler.decide(trx, ctx);
    default:
      return handler.decide(readsInTransaction(handler, ctx) ? trx : refusingQueries(ref, kind), ctx, effect);
  }
}

const refusals = new Map<string, Db>();
/** A Db for decisions that declared no reads: any query is a bug in the handler, named here. */
function refusingQueries(ref: ObjectRef, kind: string): Db {
  const name = `${ref.kind}.${kind}`;
  let db = refusals.get(name);
  if (!db) {
    db = compileOnly(`the ${ref.kind} ${kind} handler queried in its decision without declaring readsInTransaction`);
    refusals.set(name, db);
  }
  return db;
}
