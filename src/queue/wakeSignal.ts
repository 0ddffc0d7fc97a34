import { WAKE_CHANNEL } from '../db/channels.ts';
import { notifyAsynchronously } from '../db/asynchronousCommit.ts';
import type { Db } from '../db/Database.ts';
import type { ObjectRef } from '../db/objectTables.ts';

/**
 * Tells every worker to look for due wake-ups. Send it AFTER the commit that
 * wrote them, never inside a durable transaction: PostgreSQL holds a
 * database-wide lock from a notifying transaction's commit until its WAL
 * flush, so a NOTIFY in our durable commits would line all of them up behind
 * one another. Here the NOTIFY has a transaction of its own that commits
 * without waiting for the flush. Losing it (a crash, a dropped connection)
 * only delays the drain to the workers' next poll: the wake-up row is
 * already durable.
 *
 * `objects`: the objects whose wake-ups the caller wrote, named in the
 * signal (see namedObjects) so the lane it starts takes them first and
 * reads their rows in its first round trip. A hint only: the lane takes
 * whatever else is due as well.
 */
export function signalWorkers(db: Db, objects: readonly ObjectRef[] = []): Promise<void> {
  let signal = signals.get(db);
  if (!signal) {
    signal = new CoalescedSignal((payload) => notifyAsynchronously(db, WAKE_CHANNEL, payload));
    signals.set(db, signal);
  }
  return signal.send(objects);
}

/** The most objects a signal names: a lane takes at most 64 objects, and a NOTIFY payload must stay small. */
const MAX_NAMED = 32;

/**
 * The objects a signal's payload names ("lease:12,resource:3"); none for an
 * empty or malformed one (every signal means "look", whatever it names).
 */
export function namedObjects(payload: string | undefined): ObjectRef[] {
  const named: ObjectRef[] = [];
  for (const part of (payload ?? '').split(',').slice(0, MAX_NAMED)) {
    const match = /^(lease|resource|blueprint):([1-9][0-9]{0,15})$/.exec(part);
    if (match) named.push({ kind: match[1] as ObjectRef['kind'], id: Number(match[2]) });
  }
  return named;
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
  /** The objects the next NOTIFY names (the callers' since the last one started), up to MAX_NAMED. */
  private named = new Set<string>();

  constructor(private readonly notify: (payload: string) => Promise<void>) {}

  send(objects: readonly ObjectRef[]): Promise<void> {
    for (const o of objects) if (this.named.size < MAX_NAMED) this.named.add(`${o.kind}:${o.id}`);
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
    const payload = [...this.named].join(',');
    this.named = new Set();
    const sending = this.notify(payload).finally(() => {
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
export function signalWorkersQuietly(db: Db, objects: readonly ObjectRef[] = []): Promise<void> {
  return signalWorkers(db, objects).catch(() => undefined);
}
