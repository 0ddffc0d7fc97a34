import { sql } from 'kysely';
import { z } from 'zod';
import type { Db } from '../db/Database.ts';

/**
 * A worker counts as live here while its heartbeat is at most this old:
 * several heartbeats (SLIPWAY_HEARTBEAT_MS, 5 s by default), so that a
 * worker that merely beat late is not taken for gone.
 */
const LIVE_WITHIN_S = 30;
/** How long one read of the registry serves the appends of a process. */
const SAMPLE_MS = 1000;

/** What one worker advertises it runs: versions by object kind and command kind (WorkerRegistry, handledVersions). */
const Handles = z.record(z.string(), z.record(z.string(), z.array(z.number().int())));
export type Handles = z.infer<typeof Handles>;

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
    .where('heartbeat_at', '>', sql<Date>`now() - make_interval(secs => ${LIVE_WITHIN_S})`)
    .execute()
    .then((rows) => rows.map((row) => Handles.parse(row.handles)));
  samples.set(db, { at: Date.now(), handles });
  // A failed read is not kept: the next append reads again.
  handles.catch(() => samples.delete(db));
  return handles;
}
