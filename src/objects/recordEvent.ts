import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import type { ObjectRef } from '../queue/objectTables.ts';

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

/** Appends rows to objects' event logs, in the caller's transaction. */
export async function recordEvents(trx: Db, events: readonly EventInput[]): Promise<void> {
  if (events.length === 0) return;
  await trx
    .insertInto('events')
    .values(
      events.map((e) => ({
        target_kind: e.target.kind,
        target_id: e.target.id,
        command_id: e.commandId,
        type: e.type,
        from_state: e.fromState ?? null,
        to_state: e.toState ?? null,
        message: e.message,
        actor: e.actor.issuedBy,
        source: e.actor.source,
        data: e.data === undefined ? null : JSON.stringify(e.data),
      })),
    )
    .execute();
}

export function recordEvent(trx: Db, event: EventInput): Promise<void> {
  return recordEvents(trx, [event]);
}
