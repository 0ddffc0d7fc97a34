import type { Db } from './Database.ts';
import type { Actor } from '../domain/Actor.ts';
import type { ObjectRef } from './objectTables.ts';

export interface EventInput {
  readonly target: ObjectRef;
  readonly type: string;
  readonly message: string;
  readonly actor: Pick<Actor, 'issuedBy' | 'source'>;
  readonly commandId: number | null;
  readonly fromState?: string | null;
  readonly toState?: string | null;
  readonly data?: unknown;
}

/** An event as its `events` row; `data` stays a value (null when absent) for the caller to encode. */
export function eventRow(e: EventInput) {
  return {
    target_kind: e.target.kind,
    target_id: e.target.id,
    command_id: e.commandId,
    type: e.type,
    from_state: e.fromState ?? null,
    to_state: e.toState ?? null,
    message: e.message,
    actor: e.actor.issuedBy,
    source: e.actor.source,
    data: e.data ?? null,
  };
}

/** Appends rows to objects' event logs, in the caller's transaction. */
export async function recordEvents(trx: Db, events: readonly EventInput[]): Promise<void> {
  if (events.length === 0) return;
  await trx
    .insertInto('events')
    .values(
      events.map((e) => {
        const row = eventRow(e);
        return { ...row, data: row.data === null ? null : JSON.stringify(row.data) };
      }),
    )
    .execute();
}

export function recordEvent(trx: Db, event: EventInput): Promise<void> {
  return recordEvents(trx, [event]);
}
