import type pg from 'pg';
import type { CommandRow } from '../../../migrations/schema.ts';
import { OBJECT_TABLE, type ObjectRef } from '../../queue/objectTables.ts';
import type { PendingAnnouncements } from './announcements.ts';

// The queue head of one object. A `running` command comes first: finding one
// means the previous lock holder died mid-command, so it is repeated (driver
// calls are at least once). Then preempting kinds (release, reclaim) ahead of
// older work, then everything else in order. Preemption is about order only:
// a yielded release waits out its own not-before like anything else (else a
// release whose driver keeps failing, or one this worker cannot run, would be
// retried in a hot loop), and a yielded allocation is not ready, so it never
// holds a release up.
//
// The drain sends these reads in one simple query with the statement before
// them (a commit, an unlock), one round trip instead of two: so they are SQL
// text, with only escaped literals and numbers spliced in.
const objectIs = (client: pg.PoolClient, target: ObjectRef) =>
  `target_kind = ${client.escapeLiteral(target.kind)} and target_id = ${Number(target.id)}`;
const ready = (client: pg.PoolClient, target: ObjectRef) => `
  ${objectIs(client, target)} and status in ('queued', 'running')
  and (not_before <= now() or status = 'running')`;
const headText = (client: pg.PoolClient, target: ObjectRef, preempting: readonly string[]) => `
  select * from commands where ${ready(client, target)}
  order by (status = 'running') desc,
           (kind = any(array[${preempting.map((k) => client.escapeLiteral(k)).join(', ')}]::text[])) desc, id
  limit 1`;

type Results<T> = pg.QueryResult<T & pg.QueryResultRow>;

/**
 * Starts a lock hold in one round trip: tries the object's session advisory
 * lock (see objectLock.ts), then reads the queue head and the object's row.
 * Each is its own statement, so the reads see everything committed before the
 * lock was taken; when it was not, their rows are simply ignored.
 */
export async function lockAndReadHead<Row>(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
): Promise<{ locked: false } | { locked: true; head: CommandRow | undefined; object: Row | undefined }> {
  const [lock, head, object] = (await client.query(
    `select pg_try_advisory_lock(object_lock_key(${client.escapeLiteral(target.kind)}, ${Number(target.id)})) as locked;
     ${headText(client, target, preempting)};
     select * from ${OBJECT_TABLE[target.kind]} where id = ${Number(target.id)}`,
  )) as unknown as [Results<{ locked: boolean }>, Results<CommandRow>, Results<Row>];
  if (lock.rows[0]?.locked !== true) return { locked: false };
  return { locked: true, head: head.rows[0], object: object.rows[0] };
}

/** Commits the outcome transaction and reads the next queue head, in one round trip. */
export async function commitAndReadHead(
  client: pg.PoolClient,
  target: ObjectRef,
  preempting: readonly string[],
): Promise<CommandRow | undefined> {
  const [, head] = (await client.query(`commit; ${headText(client, target, preempting)}`)) as unknown as [
    Results<unknown>,
    Results<CommandRow>,
  ];
  return head.rows[0];
}

/**
 * Ends a lock hold in one round trip: sends the held announcements, lets go
 * of the object's advisory lock, and then looks at the queue: whether a
 * command is ready (appended while we held the lock, by someone whose
 * wake-up found the lock taken), and else when the earliest yielded command
 * becomes ready, if any. The look comes after the unlock, as its own
 * statement with its own snapshot: a command that committed before the
 * unlock is then always seen.
 */
export async function announceUnlockAndLook(
  client: pg.PoolClient,
  target: ObjectRef,
  announcements: PendingAnnouncements,
): Promise<{ ready: boolean; nextNotBefore: Date | undefined }> {
  const results = (await client.query(
    `${announcements.take()}
     select pg_advisory_unlock(object_lock_key(${client.escapeLiteral(target.kind)}, ${Number(target.id)}));
     select exists (select 1 from commands where ${ready(client, target)}) as ready,
            (select min(not_before) from commands where ${objectIs(client, target)} and status = 'queued') as at`,
  )) as unknown as Results<{ ready: boolean; at: Date | null }>[];
  const row = results.at(-1)!.rows[0];
  return { ready: row?.ready === true, nextNotBefore: row?.at ?? undefined };
}

/**
 * Marks a command `running` before its handler calls a driver. Committed
 * asynchronously on purpose: losing this mark in a crash only means the
 * command is found `queued` instead of `running`, and either way it is run
 * again. The outcome commit that follows is fully durable. Announcements
 * held by the drain go first, before the driver call can take its time.
 */
export async function markRunning(client: pg.PoolClient, commandId: number, announcements: PendingAnnouncements): Promise<void> {
  await client.query(
    `${announcements.take()} begin; set local synchronous_commit = off;
     update commands set status = 'running', started_at = now() where id = ${Number(commandId)};
     commit`,
  );
}
