import type pg from 'pg';
import type { BlueprintRow, CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { CommandHandler, HandlerContext, ObjectTypes, Outcome } from './Handler.ts';

/** The types a drain lane (DrainLane.ts) shares with its parts. */

export type ObjectRow = ObjectTypes[ObjectKind]['row'];
/** The results of one round trip's statements, those the lane reads. */
export type Results = pg.QueryResult<pg.QueryResultRow>[];

/** An object this lane holds the lock of, its row as the last commit left it, and its next ready commands. */
export interface Held {
  readonly ref: ObjectRef;
  object: ObjectRow;
  blueprint: BlueprintRow;
  head: CommandRow;
  /** The ready commands after the head, in queue order: the rest of its run, if they may join it. */
  following: readonly CommandRow[];
}

/** One held object's command in a step, from what the state table says to the outcome decided. */
export interface Planned {
  readonly held: Held;
  readonly handler?: CommandHandler<ObjectKind>;
  readonly ctx?: HandlerContext<ObjectKind>;
  /** Known before any handler ran (settled by the state table or payload), or by a failed driver call. */
  outcome?: Outcome;
  effect?: unknown;
  /** The driver call in flight (see DrainLane's EFFECT_JOIN_MS); resolves, never rejects, once `outcome` or `effect` is known. */
  running?: Promise<void>;
  /** Its command's `running` mark, for a call that outlived its step's join window (see runningMarks.ts). */
  marked?: Promise<void>;
  effectDone?: boolean;
  /** A kind or version this worker does not know: handed on untouched. */
  readonly handOff?: string;
}

/** A held object's key in the lane's maps. */
export const keyOf = (ref: ObjectRef) => `${ref.kind}:${ref.id}`;
