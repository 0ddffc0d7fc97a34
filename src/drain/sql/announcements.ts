import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { COMMANDS_CHANNEL } from '../commitOutcome.ts';
import type { Outcome } from '../Handler.ts';

/**
 * Notices for waiters (CLI, API) that commands settled or yielded, held by
 * the drain until its lock hold ends (slipway_drain_next sends them as it
 * lets go) or a driver call is about to be made (markRunning sends them, so
 * a slow call never holds a notice back). They go only after their outcome's
 * commit, never inside it: NOTIFY takes a database-wide lock held until its
 * transaction's commit is flushed, which would serialise the commits of
 * every drain. Their own transaction commits asynchronously for the same
 * reason. A waiter that misses a notice (the worker or server died in
 * between) finds the outcome on its fallback read.
 *
 * They travel as one JSON array, whatever their number: a long lock hold (a
 * blueprint serving thousands of leases) can gather more notices than a
 * select list may have columns (1664).
 */
export class PendingAnnouncements {
  private notices: string[] = [];

  /** One command's notice: its id, object and status (`queued` again for a yield). */
  static notice(target: ObjectRef, commandId: number, status: Outcome['status']): string {
    return JSON.stringify({ id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status });
  }

  /** The held notices and `notice` as the JSON array a round trip that may end the hold carries. */
  withNotice(notice: string | undefined): string {
    return JSON.stringify(notice === undefined ? this.notices : [...this.notices, notice]);
  }

  /**
   * After that round trip succeeded: if the hold goes on, nothing was sent
   * and `notice` is held with the rest; if it ended, all of them were sent.
   */
  keep(notice: string | undefined, holdGoesOn: boolean): void {
    if (!holdGoesOn) this.notices = [];
    else if (notice !== undefined) this.notices.push(notice);
  }

  /**
   * The statement that sends the held notices, for a transaction of the
   * caller's that commits asynchronously; none if none. Taking them empties
   * the list.
   */
  take(): CompiledQuery[] {
    if (this.notices.length === 0) return [];
    const notices = JSON.stringify(this.notices);
    this.notices = [];
    return [
      CompiledQuery.raw('select pg_notify($1, n) from jsonb_array_elements_text($2::jsonb) with ordinality as a(n, i) order by i', [
        COMMANDS_CHANNEL,
        notices,
      ]),
    ];
  }
}
