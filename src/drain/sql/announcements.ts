import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../queue/objectTables.ts';
import { COMMANDS_CHANNEL } from '../commitOutcome.ts';
import type { Outcome } from '../Handler.ts';

/**
 * Notices for waiters (CLI, API) that commands settled or yielded, held by
 * the drain until its next round trip that can carry them: the end of its
 * lock hold, or the mark before a driver call (so a slow call never holds a
 * notice back). They go only after their outcome's commit, never inside it:
 * NOTIFY takes a database-wide lock held until its transaction's commit is
 * flushed, which would serialise the commits of every drain. Their own
 * transaction commits asynchronously for the same reason. A waiter that
 * misses a notice (the worker or server died in between) finds the outcome
 * on its fallback read.
 */
export class PendingAnnouncements {
  private notices: string[] = [];

  add(target: ObjectRef, commandId: number, status: Outcome['status']): void {
    const notice = { id: commandId, target: `${target.kind}:${target.id}`, status: status === 'yield' ? 'queued' : status };
    this.notices.push(JSON.stringify(notice));
  }

  /**
   * The statements that send the held notices in a transaction of their
   * own, to put in front of others in one simple query; none if none.
   * Taking them empties the list. They travel as one JSON array, whatever
   * their number: a long lock hold (a blueprint serving thousands of leases)
   * can gather more notices than a select list may have columns (1664).
   */
  take(): (string | CompiledQuery)[] {
    if (this.notices.length === 0) return [];
    const notices = JSON.stringify(this.notices);
    this.notices = [];
    return [
      'begin',
      'set local synchronous_commit = off',
      CompiledQuery.raw(
        `select pg_notify('${COMMANDS_CHANNEL}', n) from jsonb_array_elements_text($1::jsonb) with ordinality as a(n, i) order by i`,
        [notices],
      ),
      'commit',
    ];
  }
}
