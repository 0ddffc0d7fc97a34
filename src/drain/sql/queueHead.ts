import type pg from 'pg';
import type { CommandRow, ObjectKind } from '../../../migrations/schema.ts';

// The queue head of one object. A `running` command comes first: finding one
// means the previous lock holder died mid-command, so it is repeated (driver
// calls are at least once). Then preempting kinds (release, reclaim) ahead of
// older work, then everything else in order. Preemption is about order only:
// a yielded release waits out its own not-before like anything else (else a
// release whose driver keeps failing, or one this worker cannot run, would be
// retried in a hot loop), and a yielded allocation is not ready, so it never
// holds a release up.
const READY = `
  target_kind = $1 and target_id = $2 and status in ('queued', 'running')
  and (not_before <= now() or status = 'running')`;

export async function selectQueueHead(
  client: pg.PoolClient,
  kind: ObjectKind,
  id: number,
  preempting: readonly string[],
): Promise<CommandRow | undefined> {
  const { rows } = await client.query<CommandRow>({
    name: 'slipway_queue_head',
    text: `select * from commands where ${READY}
           order by (status = 'running') desc, (kind = any($3::text[])) desc, id
           limit 1`,
    values: [kind, id, preempting],
  });
  return rows[0];
}

/**
 * What the drain needs to know right after it let go of the object: whether
 * a command is ready (appended while we held the lock, by someone whose
 * wake-up found the lock taken), and else when the earliest yielded command
 * becomes ready, if any. Read after the unlock, never before: a command that
 * committed before the unlock is then always seen.
 */
export async function queueAfterUnlock(
  client: pg.PoolClient,
  kind: ObjectKind,
  id: number,
): Promise<{ ready: boolean; nextNotBefore: Date | undefined }> {
  const { rows } = await client.query<{ ready: boolean; at: Date | null }>({
    name: 'slipway_queue_after_unlock',
    text: `select exists (select 1 from commands where ${READY}) as ready,
                  (select min(not_before) from commands
                   where target_kind = $1 and target_id = $2 and status = 'queued') as at`,
    values: [kind, id],
  });
  return { ready: rows[0]?.ready === true, nextNotBefore: rows[0]?.at ?? undefined };
}

/**
 * Marks a command `running` before its handler calls a driver. Committed
 * asynchronously on purpose: losing this mark in a crash only means the
 * command is found `queued` instead of `running`, and either way it is run
 * again. The outcome commit that follows is fully durable.
 */
export async function markRunning(client: pg.PoolClient, commandId: number): Promise<void> {
  await client.query(
    `begin; set local synchronous_commit = off;
     update commands set status = 'running', started_at = now() where id = ${Number(commandId)};
     commit`,
  );
}
