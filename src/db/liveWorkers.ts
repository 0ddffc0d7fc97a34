import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from './Database.ts';

/**
 * A worker counts as live while its last heartbeat is at most this many
 * intervals (SLIPWAY_HEARTBEAT_MS) old: a beat or two late is forgiven, a
 * worker that stopped beating (dead, or its runner down) soon is not.
 */
const LIVE_HEARTBEATS = 3;

/** The condition on a `workers` row that it is live, for a fleet beating every `heartbeatMs`. */
export function liveWorkerCondition(heartbeatMs: number) {
  return sql<boolean>`heartbeat_at > now() - make_interval(secs => ${(heartbeatMs * LIVE_HEARTBEATS) / 1000})`;
}

/** How many workers are live. */
export async function countLiveWorkers(db: Db, heartbeatMs: number): Promise<number> {
  const row = await db
    .selectFrom('workers')
    .select(sql<number>`count(*)::int`.as('n'))
    .where(liveWorkerCondition(heartbeatMs))
    .executeTakeFirstOrThrow();
  return row.n;
}

/** What one worker advertises it runs: versions by object kind and command kind (WorkerRegistry, handledVersions). */
const Handles = z.record(z.string(), z.record(z.string(), z.array(z.number().int())));
export type Handles = z.infer<typeof Handles>;

/**
 * The heartbeat interval admission checks assume, an append having no
 * worker settings at hand: twice SLIPWAY_HEARTBEAT_MS's default, so a worker
 * counts as live for 30 s after its last beat. With a longer interval
 * configured a live worker may look gone between beats; its commands are
 * then queued rather than refused, which only waits.
 */
const ADMISSION_HEARTBEAT_MS = 10_000;
/** How long one read of the registry serves the appends of a process. */
const SAMPLE_MS = 1000;

const samples = new WeakMap<Db, { readonly at: number; readonly handles: Promise<Handles[]> }>();

/**
 * The command versions each live worker runs, read from the `workers`
 * registry at most once a second per query builder (the API's appends share
 * one), so checking every append from outside costs no round trip of its own.
 */
export function liveHandlers(db: Db): Promise<Handles[]> {
  const sample = samples.get(db);
  if (sample && Date.now() - sample.at < SAMPLE_MS) return sample.handles;
  const handles = db
    .selectFrom('workers')
    .select('handles')
    .where(liveWorkerCondition(ADMISSION_HEARTBEAT_MS))
    .execute()
    .then((rows) => rows.map((row) => Handles.parse(row.handles)));
  samples.set(db, { at: Date.now(), handles });
  // A failed read is not kept: the next append reads again.
  handles.catch(() => samples.delete(db));
  return handles;
}
