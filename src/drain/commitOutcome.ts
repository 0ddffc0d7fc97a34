import type { CompiledQuery } from 'kysely';
import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { systemActorName } from '../domain/Actor.ts';
import { commandKindSpec } from '../domain/commandKinds.ts';
import { canTransition } from '../domain/lifecycle.ts';
import type { EventInput } from '../db/recordEvent.ts';
import { validatedAppend } from '../queue/appendCommand.ts';
import { describeObject, type ObjectRef } from '../db/objectTables.ts';
import { type WakeTarget, wakeObjectsQuery } from '../queue/wakeObjects.ts';
import type { Outcome } from './Handler.ts';
import type { ObjectRow } from './laneTypes.ts';
import { appendFollowUpsStatement, type FollowUpAppend } from './sql/appendFollowUps.ts';
import { type Settlement, settleCommands } from './sql/settleCommand.ts';
import { type ObjectUpdate, updateObjectsStatement } from './sql/updateObjects.ts';

/** Another writer changed the object under us: the single-writer rule was broken. */
export class VersionConflictError extends Error {
  override name = 'VersionConflictError';
}

/** SW001 from the drain's version check (sql/lockVersions.ts) as the error it means; any other error as it is. */
export function asVersionConflict(error: unknown): unknown {
  return (error as { code?: string }).code === VERSION_CONFLICT_SQLSTATE ? new VersionConflictError((error as Error).message) : error;
}

/** SQLSTATEs of the drain's own checks (slipway_expect, src/db/functions/slipway_expect.ts). */
export const VERSION_CONFLICT_SQLSTATE = 'SW001';
const FOLLOW_UP_TARGET_MISSING_SQLSTATE = 'SW002';

/** One object's command applied in a step: the row as the drain carries it, the command and what was decided. */
export interface Decided {
  readonly target: ObjectRef;
  /** The row as this command's decision read it (in a run, as the command before left it). */
  readonly object: ObjectRow;
  readonly command: CommandRow;
  readonly outcome: Outcome;
}

/**
 * A step's outcomes as the statements that commit them, for the round trip
 * that ends the step's transaction (see DrainLane): each object's new state
 * and columns (returning the row as it now is, which the drain carries to
 * the next command), absent when an outcome leaves the row alone; then every
 * command's events, status and the cancellation of queued work it
 * supersedes, in one statement; then the follow-up commands, and the
 * wake-ups of their objects in one call. The versions were checked, and the
 * rows locked, by the transaction's first statement (sql/lockVersions.ts).
 *
 * They are built, not run: every check is made inside them and fails the
 * whole query, commit included.
 */
export interface StepStatements {
  /** The objects whose outcomes change their rows, by kind and the columns set: one update each, returning the rows. */
  readonly objectUpdates: ReadonlyArray<{ readonly targets: readonly ObjectRef[]; readonly query: CompiledQuery }>;
  readonly rest: readonly CompiledQuery[];
  /** The other objects the follow-ups woke (for the drain to take, if it has room). */
  readonly woken: readonly ObjectRef[];
}

export function stepStatements(db: Db, decided: readonly Decided[]): StepStatements {
  const appends: FollowUpAppend[] = [];
  const wakes: WakeTarget[] = [];
  for (const d of decided) {
    const followUps = followUpsOf(d.target, d.command, d.outcome);
    appends.push(...followUps.appends);
    wakes.push(...followUps.wakes);
  }
  return {
    objectUpdates: objectUpdates(decided),
    rest: [
      ...(decided.length > 0 ? [settleCommands(decided.map((d) => settlement(d.target, d.object, d.command, d.outcome))).compile(db)] : []),
      ...(appends.length > 0 ? [appendFollowUpsStatement(appends, FOLLOW_UP_TARGET_MISSING_SQLSTATE)] : []),
      ...(wakes.length > 0 ? [wakeObjectsQuery(wakes).compile(db)] : []),
    ],
    woken: wakes.filter((w) => !w.runAt || w.runAt.getTime() <= Date.now()).map(({ kind, id }) => ({ kind, id })),
  };
}

/**
 * Each object's row as its outcomes in the step leave it: a run's commands
 * change their object one after another, and writing each change as a row
 * version of its own would make as many dead tuples. The version rises by
 * one per outcome that changes the row, as each was decided on the one
 * before (commandRun.ts, rowAfter). Objects of a kind whose outcomes set
 * the same columns share one statement (sql/updateObjects.ts).
 */
function objectUpdates(decided: readonly Decided[]): StepStatements['objectUpdates'] {
  const byObject = new Map<string, { target: ObjectRef; version: number; changes: number; values: Record<string, unknown> }>();
  for (const { target, object, outcome } of decided) {
    if (outcome.to === undefined && outcome.set === undefined) continue;
    const key = `${target.kind}:${target.id}`;
    const update = byObject.get(key) ?? { target, version: object.version, changes: 0, values: {} };
    Object.assign(update.values, outcome.set, outcome.to !== undefined ? { state: outcome.to } : {});
    update.changes += 1;
    byObject.set(key, update);
  }
  const groups = new Map<string, { kind: ObjectKind; columns: string[]; targets: ObjectRef[]; updates: ObjectUpdate[] }>();
  for (const { target, version, changes, values } of byObject.values()) {
    const columns = Object.keys(values).sort();
    const key = `${target.kind}:${columns.join(',')}`;
    const group = groups.get(key) ?? { kind: target.kind, columns, targets: [], updates: [] };
    group.targets.push(target);
    group.updates.push({ id: target.id, version: version + changes, values });
    groups.set(key, group);
  }
  return [...groups.values()].map(({ kind, columns, targets, updates }) => ({ targets, query: updateObjectsStatement(kind, columns, updates) }));
}

/**
 * What settling `command` with `outcome` writes besides the object's row:
 * the state change's events (each checked against the state table: the
 * state it passes through, if any, then the one it ends in) and the
 * outcome's own events, and, for a command done, the queued kinds it
 * supersedes.
 */
function settlement(target: ObjectRef, object: { state: string }, command: CommandRow, outcome: Outcome): Settlement {
  const actor = { issuedBy: command.issued_by, source: command.source };
  const events: EventInput[] = [];
  let from = object.state;
  const path = outcome.to === undefined ? [] : [...(outcome.through ? [outcome.through] : []), { state: outcome.to, message: outcome.message }];
  for (const step of path) {
    if (!canTransition(target.kind, from, step.state)) {
      throw new Error(`${target.kind} ${target.id}: ${from} → ${step.state} is not in the state table`);
    }
    if (step.state !== from) {
      events.push({ target, type: 'state', fromState: from, toState: step.state, message: step.message, actor, commandId: command.id });
    }
    from = step.state;
  }
  for (const e of outcome.events ?? []) {
    events.push({ target: e.on ?? target, type: e.type, message: e.message, data: e.data, actor, commandId: command.id });
  }
  const supersedes = outcome.status === 'done' ? (commandKindSpec(target.kind, command.kind)?.supersedes ?? []) : [];
  return { command, outcome, events, supersedes };
}

/**
 * The outcome's follow-up commands, issued as the sending object's part of
 * Slipway (`system:blueprint`...) with the request id of, and a link to, the
 * command that caused them; validated, for the step's one checked
 * append of them all (sql/appendFollowUps.ts, failing with SW002 when a
 * target does not exist), and the objects they must wake: the caller wakes
 * those in one call at the end of its transaction, so every commit writes
 * wake-up rows in the same (key) order. A follow-up to the object itself
 * wakes nothing: its drain sees it before it lets go.
 */
function followUpsOf(target: ObjectRef, command: CommandRow, outcome: Outcome): { appends: FollowUpAppend[]; wakes: WakeTarget[] } {
  const appends: FollowUpAppend[] = [];
  const wakes: WakeTarget[] = [];
  // Slipway decided these, not whoever asked for the command that led to them: its part that did is the sending object's drain.
  const issuedBy = systemActorName(target.kind);
  for (const followUp of outcome.followUps ?? []) {
    const notBefore = followUp.notBeforeMs ? new Date(Date.now() + followUp.notBeforeMs) : null;
    const request = {
      target: followUp.target,
      kind: followUp.kind,
      payload: followUp.payload,
      actor: { issuedBy, source: 'system' as const },
    };
    appends.push({
      ...validatedAppend(request, { fromOutside: false }),
      target: followUp.target,
      kind: followUp.kind,
      causedBy: command.id,
      issuedBy,
      reason: followUp.reason,
      requestId: command.request_id,
      notBefore,
      missing: `${followUp.kind} from command ${command.id}: ${describeObject(followUp.target)} does not exist`,
    });
    const toSelf = followUp.target.kind === target.kind && followUp.target.id === target.id;
    if (!toSelf) wakes.push({ ...followUp.target, runAt: notBefore ?? undefined });
  }
  return { appends, wakes };
}
