import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import { compileOnly } from '../db/compileOnly.ts';
import type { Logger } from '../log.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { wakeObjectsQuery } from '../queue/wakeObjects.ts';
import { VersionConflictError } from './commitOutcome.ts';
import { formatDuration } from '../domain/durations.ts';
import { backoffMs } from './driverFailure.ts';
import { keyOf, type Planned } from './laneTypes.ts';
import { RoundTrip } from './roundTrip.ts';

/** What the committer asks of the lane whose step it commits. */
export interface CommittingLane {
  /** Decides and commits the objects' commands (with the rest of their runs, if `runs`), then takes their next commands. */
  decideAndCommit(planned: readonly Planned[], runs: boolean): Promise<void>;
  send(trip: RoundTrip<never>): Promise<unknown>;
  /** The object is no longer the lane's (its lock was freed). */
  letGo(ref: ObjectRef): void;
}

/**
 * How often a step's commit is tried when PostgreSQL aborts it to break a
 * deadlock (40P01) or a serialization failure (40001): such a conflict means
 * only that two commits crossed, and trying again at once is the remedy
 * PostgreSQL's manual gives.
 */
const COMMIT_ATTEMPTS = 5;
const isRetryableConflict = (error: unknown) => ['40P01', '40001'].includes((error as { code?: string }).code ?? '');
/** An error PostgreSQL answered (it has a SQLSTATE), as opposed to a lost connection. */
const isServerError = (error: unknown) => typeof (error as { code?: unknown }).code === 'string';

/**
 * Decides and commits a lane's step, then takes its next commands. A
 * conflict PostgreSQL breaks is tried again; any other failure of a step of
 * several objects, or of a run, is tried one object at a time and one
 * command each, so one bad command cannot hold up the others (effects are
 * not run again).
 */
export async function commitWithRetries(
  client: pg.PoolClient,
  planned: readonly Planned[],
  lane: CommittingLane,
  log: Logger,
  runs = true,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await lane.decideAndCommit(planned, runs);
      return;
    } catch (error) {
      await client.query('rollback').catch(() => undefined);
      if (planned.length === 0) throw error;
      if (!isServerError(error) && !(error instanceof VersionConflictError)) throw error;
      if (await committedAlready(client, planned)) throw error;
      if (isRetryableConflict(error) && attempt < COMMIT_ATTEMPTS) {
        log.info({ attempt, code: (error as { code?: string }).code }, 'step commit lost a deadlock; retrying');
        continue;
      }
      // Alone and without its run: a command that cannot be committed is then its object's head.
      if (planned.length > 1 || (runs && planned[0]!.held.following.length > 0)) {
        for (const p of planned) await commitWithRetries(client, [p], lane, log, false);
        return;
      }
      await giveUp(planned[0]!, error as Error, lane, log);
      return;
    }
  }
}

/**
 * One object's command that fails every time it is committed: it is put
 * back with backoff, saying why, and the object let go (its row is read
 * afresh when it is taken again). A version conflict means another writer
 * changed the row: the single-writer rule was broken, which is a bug.
 */
async function giveUp(p: Planned, error: Error, lane: CommittingLane, log: Logger): Promise<void> {
  const { ref, head } = p.held;
  const retryInMs = backoffMs(head.attempts);
  log.error({ err: error, command: head.id, target: keyOf(ref) }, 'command failed to commit; retrying it later');
  const message = `internal error (attempt ${head.attempts + 1}), retrying in ${formatDuration(retryInMs)}: ${error.message}`;
  await lane.send(
    new RoundTrip<never>().add(
      CompiledQuery.raw(
        "update commands set status = 'queued', message = $2, attempts = attempts + 1, not_before = now() + make_interval(secs => $3::float8) where id = $1",
        [head.id, message, retryInMs / 1000],
      ),
      CompiledQuery.raw('select pg_advisory_unlock(object_lock_key($1, $2))', [ref.kind, ref.id]),
      wakeObjectsQuery([{ ...ref, runAt: new Date(Date.now() + retryInMs) }]).compile(COMPILER),
    ),
  );
  lane.letGo(ref);
}

/**
 * Whether a step whose query failed had committed after all (the failure
 * came after the commit, in the asynchronous part): its commands are no
 * longer as the lane read them. Then it must not be made again.
 */
async function committedAlready(client: pg.PoolClient, planned: readonly Planned[]): Promise<boolean> {
  const heads = planned.filter((p) => !p.handOff).map((p) => p.held.head);
  if (heads.length === 0) return false;
  const { rows } = await client.query<{ id: number; status: string; attempts: number }>(
    'select id, status, attempts from commands where id = any($1::bigint[])',
    [heads.map((h) => h.id)],
  );
  const now = new Map(rows.map((r) => [Number(r.id), r]));
  return heads.some((h) => {
    const row = now.get(h.id);
    return !row || !['queued', 'running'].includes(row.status) || row.attempts !== h.attempts;
  });
}

/** Compiles the statements the committer sends itself. */
const COMPILER = compileOnly('the committer compiles statements with this; it runs none');
