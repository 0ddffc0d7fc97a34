import { CompiledQuery } from 'kysely';

/**
 * Marks commands `running` as their driver calls go out, so a crash mid-call
 * shows (and the call is repeated). Sent in a transaction that commits
 * asynchronously: losing the mark only means the command is found `queued`
 * instead of `running`, and either way it is run again.
 */
export function markRunningStatement(commandIds: readonly number[]): CompiledQuery {
  return CompiledQuery.raw("update commands set status = 'running', started_at = now() where id = any($1::bigint[])", [commandIds]);
}
