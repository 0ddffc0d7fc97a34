import type { CommandRow, CommandStatus } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { ObjectRef } from '../db/objectTables.ts';

/**
 * What was asked of an object (its commands) and what happened to it (its
 * events), in one line of time: each where it happened, a command when it
 * settled (or, still queued or running, when it was queued).
 */
export type TimelineEntry = CommandEntry | EventEntry;

interface EntryBase {
  readonly at: Date;
  readonly id: number;
  /** Who asked (a command's issued_by, an event's actor). */
  readonly who: string;
  /** From where: web, cli, api, gc or system. */
  readonly where: string;
  readonly reason: string | null;
}

export interface CommandEntry extends EntryBase {
  readonly type: 'command';
  /** When it was queued (`at` is when it settled, once it has). */
  readonly queuedAt: Date;
  readonly kind: string;
  readonly status: CommandStatus;
  readonly message: string | null;
  readonly finishedAt: Date | null;
}

export interface EventEntry extends EntryBase {
  readonly type: 'event';
  readonly event: string;
  readonly commandId: number | null;
  readonly fromState: string | null;
  readonly toState: string | null;
  readonly message: string;
}

/** An object's queue and its timeline: what `show` prints under the object's fields. */
export interface ObjectHistory {
  readonly queue: CommandRow[];
  readonly timeline: Timeline;
}

export interface Timeline {
  /** Oldest first. */
  readonly entries: TimelineEntry[];
  /** True when older entries were left out. */
  readonly truncated: boolean;
}

/** How many timeline entries `show` reads: the recent past, not a blueprint's whole life. */
const TIMELINE_LIMIT = 200;

export async function readHistory(db: Db, ref: ObjectRef, timelineLimit = TIMELINE_LIMIT): Promise<ObjectHistory> {
  return { queue: await readQueue(db, ref), timeline: await readTimeline(db, ref, timelineLimit) };
}

/** The object's queue: its commands not yet settled, in the order they were appended. */
function readQueue(db: Db, ref: ObjectRef): Promise<CommandRow[]> {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('target_kind', '=', ref.kind)
    .where('target_id', '=', ref.id)
    .where('status', 'in', ['queued', 'running'])
    .orderBy('id')
    .execute();
}

/** The latest `limit` commands and events of one object, merged chronologically. */
async function readTimeline(db: Db, ref: ObjectRef, limit: number): Promise<Timeline> {
  const commands = await db
    .selectFrom('commands')
    .select(['id', 'created_at', 'kind', 'status', 'issued_by', 'source', 'reason', 'message', 'finished_at'])
    .where('target_kind', '=', ref.kind)
    .where('target_id', '=', ref.id)
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute();
  const events = await db
    .selectFrom('events')
    .leftJoin('commands', 'commands.id', 'events.command_id')
    .select([
      'events.id',
      'events.created_at',
      'events.type',
      'events.command_id',
      'events.from_state',
      'events.to_state',
      'events.actor',
      'events.source',
      'events.message',
      'commands.reason',
    ])
    .where('events.target_kind', '=', ref.kind)
    .where('events.target_id', '=', ref.id)
    .orderBy('events.id', 'desc')
    .limit(limit + 1)
    .execute();

  const entries: TimelineEntry[] = [
    ...commands.map(
      (c): CommandEntry => ({
        type: 'command',
        // A command happened when it settled: what it did sits among the events it caused, not at the time it was asked.
        at: c.finished_at ?? c.created_at,
        queuedAt: c.created_at,
        id: c.id,
        kind: c.kind,
        status: c.status,
        who: c.issued_by,
        where: c.source,
        reason: c.reason,
        message: c.message,
        finishedAt: c.finished_at,
      }),
    ),
    ...events.map(
      (e): EventEntry => ({
        type: 'event',
        at: e.created_at,
        id: e.id,
        event: e.type,
        commandId: e.command_id,
        fromState: e.from_state,
        toState: e.to_state,
        who: e.actor,
        where: e.source,
        reason: e.reason,
        message: e.message,
      }),
    ),
  ].sort(chronologically);
  return { entries: entries.slice(-limit), truncated: entries.length > limit };
}

/**
 * By time; within one instant (one transaction), the events a command's
 * step committed before the command they settled it with, and before the
 * commands queued by it, its consequences.
 */
function chronologically(a: TimelineEntry, b: TimelineEntry): number {
  const rank = (e: TimelineEntry) => (e.type === 'event' ? 0 : 1);
  return a.at.getTime() - b.at.getTime() || rank(a) - rank(b) || a.id - b.id;
}
