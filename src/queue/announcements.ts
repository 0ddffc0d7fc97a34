import { CompiledQuery } from 'kysely';
import type { CommandStatus } from '../../migrations/schema.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import type { CommandNotice } from '../read/CommandNotices.ts';
import { COMMANDS_CHANNEL } from '../db/channels.ts';

/** A notice as the drain writes it: the waiters' own shape (read/CommandNotices.ts), less `caused`, which noticesStatement adds. */
export type Notice = Omit<CommandNotice, 'caused'>;

/** One command's notice for waiters (CLI, API, web): its id, object and new status (`queued` again for a yield). */
export function commandNotice(target: ObjectRef, commandId: number, status: CommandStatus | 'yield'): Notice {
  return { id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status };
}

/**
 * More commands than this caused by one command, and its notice leaves them
 * out (`caused` null: a waiter reads the tree instead), which keeps the
 * notice within NOTIFY's 8,000-byte payload.
 */
const MAX_CAUSED = 100;

/**
 * The statement that sends a step's notices, one NOTIFY each, in order. It
 * goes in an asynchronously committed transaction of its own right after
 * the outcomes' commit (a NOTIFY is delivered at its commit, so nothing else
 * shares that transaction to delay it), never inside the outcomes' commit: NOTIFY takes a database-wide lock held
 * until its transaction's commit is flushed, which would serialise the
 * commits of every drain. A waiter that misses a notice (the worker or server
 * died in between) finds the outcome on its fallback read. They travel as
 * one JSON array, whatever their number.
 *
 * Each notice also names the commands its command caused (`caused`: the
 * follow-ups the commit just wrote, read here by their `caused_by`), so a
 * waiter on a command tree learns the tree's new commands from the notices
 * and reads the tree once, when every command of it has settled, rather
 * than after every notice.
 */
export function noticesStatement(notices: readonly Notice[]): CompiledQuery {
  return CompiledQuery.raw(
    `select pg_notify($1, (a.n || jsonb_build_object('caused', (
       select case when count(*) <= $3 then coalesce(jsonb_agg(c.id order by c.id), '[]'::jsonb) end
       from commands c where c.caused_by = (a.n->>'id')::bigint
     )))::text)
     from jsonb_array_elements($2::jsonb) with ordinality as a(n, i) order by i`,
    [COMMANDS_CHANNEL, JSON.stringify(notices), MAX_CAUSED],
  );
}
