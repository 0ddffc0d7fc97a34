import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { COMMANDS_CHANNEL } from '../commitOutcome.ts';
import type { Outcome } from '../Handler.ts';

/** One command's notice for waiters (CLI, API, web): its id, object and status (`queued` again for a yield). */
export function commandNotice(target: ObjectRef, commandId: number, status: Outcome['status'] | 'cancelled'): string {
  return JSON.stringify({ id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status });
}

/**
 * The statement that sends a step's notices, one NOTIFY each, in order. It
 * goes in an asynchronously committed transaction of its own right after
 * the outcomes' commit (a NOTIFY is delivered at its commit, so nothing else
 * shares that transaction to delay it), never inside the outcomes' commit: NOTIFY takes a database-wide lock held
 * until its transaction's commit is flushed, which would serialise the
 * commits of every drain. A waiter that misses a notice (the worker or server
 * died in between) finds the outcome on its fallback read. They travel as
 * one JSON array, whatever their number.
 */
export function noticesStatement(notices: readonly string[]): CompiledQuery {
  return CompiledQuery.raw('select pg_notify($1, n) from jsonb_array_elements_text($2::jsonb) with ordinality as a(n, i) order by i', [
    COMMANDS_CHANNEL,
    JSON.stringify(notices),
  ]);
}
