import { sql } from 'kysely';
import { selectAsynchronously } from '../db/asynchronousCommit.ts';
import type { Db } from '../db/Database.ts';

/** The channel on which workers hear that wake-ups are due (src/drain/DrainEngine.ts). */
export const WAKE_CHANNEL = 'slipway_wake';

/**
 * Tells every worker to look for due wake-ups. Send it AFTER the commit that
 * wrote them, never inside a durable transaction: PostgreSQL holds a
 * database-wide lock from a notifying transaction's commit until its WAL
 * flush, so a NOTIFY in our durable commits would line all of them up behind
 * one another. Here the NOTIFY has a transaction of its own that commits
 * without waiting for the flush. Losing it (a crash, a dropped connection)
 * only delays the drain to the workers' next poll: the wake-up row is
 * already durable.
 */
export function signalWorkers(db: Db): Promise<void> {
  let signal = signals.get(db);
  if (!signal) {
    signal = new CoalescedSignal(() => selectAsynchronously(db, sql`pg_notify(${WAKE_CHANNEL}, '')`).then(() => undefined));
    signals.set(db, signal);
  }
  return signal.send();
}

/** One per database handle (a process's pool): the signals its appends share. */
const signals = new WeakMap<Db, CoalescedSignal>();

/**
 * A process's signals, at most one in flight: a caller that comes while one
 * is being sent waits for the next, which starts once that one is done (it
 * may have gone out before the caller's commit) and tells of every commit
 * made meanwhile. A caller's answer is thus always a NOTIFY that started
 * after its commit, as with a signal of its own, while many concurrent
 * appends (the collector's, a script's) send one each round trip, not one
 * each append, and each NOTIFY is another commit through the queue's lock.
 */
class CoalescedSignal {
  private inFlight: Promise<void> | undefined;
  private next: Promise<void> | undefined;

  constructor(private readonly notify: () => Promise<void>) {}

  send(): Promise<void> {
    if (!this.inFlight) return this.start();
    this.next ??= this.inFlight
      .catch(() => undefined)
      .then(() => {
        this.next = undefined;
        return this.start();
      });
    return this.next;
  }

  private start(): Promise<void> {
    const sending = this.notify().finally(() => {
      if (this.inFlight === sending) this.inFlight = undefined;
    });
    this.inFlight = sending;
    return sending;
  }
}

/**
 * signalWorkers for a caller that must not fail for it: the command is
 * already committed, and the poll is the backstop. Errors are swallowed on
 * purpose (a database that cannot take the signal will fail the next
 * request anyway, which reports it).
 */
export function signalWorkersQuietly(db: Db): Promise<void> {
  return signalWorkers(db).catch(() => undefined);
}
