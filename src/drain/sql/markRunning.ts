import { CompiledQuery } from 'kysely';

/**
 * Marks commands `running` whose driver calls are taking a while (see
 * RunningMarks in DrainLane), so a long call shows, and a crash mid-call
 * too. Sent in a transaction that commits asynchronously: losing the mark
 * only means the command is found `queued` instead of `running`, and either
 * way it is run again. Only commands still queued: a mark never lands on an
 * outcome already committed.
 */
export function markRunningStatement(commandIds: readonly number[]): CompiledQuery {
  return CompiledQuery.raw("update commands set status = 'running', started_at = now() where id = any($1::bigint[]) and status = 'queued'", [
    commandIds,
  ]);
}
