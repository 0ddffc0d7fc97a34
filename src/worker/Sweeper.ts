import { sql } from 'kysely';
import type { ObjectKind } from '../../migrations/schema.ts';
import { dispatchCallbacks } from '../callbacks/dispatchCallbacks.ts';
import type { Db } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { recordSweeperWakes } from '../metrics/metrics.ts';
import { wakeObjects } from '../queue/wakeObjects.ts';
import { signalWorkersQuietly } from '../queue/wakeSignal.ts';
import { WORKER_LOCK_CLASS } from './WorkerRegistry.ts';

/** How many objects one pass may wake, and how many stale commands it looks at: bound the work of a pass. */
const MAX_WAKES_PER_PASS = 500;
const MAX_STALE_LOOKED_AT = 500;

/**
 * Finds objects with a command that should have run by now (queued past its
 * not-before by more than `staleAfterMs`, or left `running`) whose advisory
 * lock nobody holds and which have no wake-up row, and wakes them. This is
 * how work survives a worker killed mid-drain (its lanes had taken the
 * objects' wake-ups): PostgreSQL drops the dead session's locks at once, so
 * the objects are drained again within seconds. It also covers a wake-up
 * row lost with an asynchronously committed claim in a server crash.
 *
 * It also frees graphile-worker jobs (callback deliveries, collector passes)
 * locked by a worker that died or whose runner stopped (see
 * `freeOrphanedJobs`), and queues the job of any callback delivery that is
 * due without one (its dispatch after the commit was lost with its process;
 * see callbacks/dispatchCallbacks.ts).
 *
 * Every worker runs one; there is no leader. Two sweepers waking the same
 * object only write one wake-up row.
 */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private lastFreed = 0;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly intervalMs: number,
    private readonly staleAfterMs: number,
  ) {}

  start(): void {
    const tick = () => {
      this.running = this.pass()
        .catch((error) => this.log.warn({ err: error }, 'sweep failed'))
        .finally(() => {
          // Jitter keeps the sweepers of many workers from running in step.
          if (this.timer !== undefined) this.timer = setTimeout(tick, this.intervalMs * (0.75 + Math.random() / 2));
        });
    };
    this.timer = setTimeout(tick, this.intervalMs);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async pass(): Promise<void> {
    // Freeing reads every locked job: once per staleness bound is enough.
    if (Date.now() - this.lastFreed >= this.staleAfterMs) {
      this.lastFreed = Date.now();
      const freed = await this.freeOrphanedJobs();
      if (freed.length > 0) this.log.info({ lockers: freed }, 'sweeper freed jobs held by workers that are gone');
    }
    const woken = await this.sweep();
    recordSweeperWakes(woken);
    if (woken > 0) this.log.info({ woken }, 'sweeper woke objects nobody was draining');
    const dispatched = await dispatchCallbacks(this.db);
    if (dispatched > 0) this.log.info({ dispatched }, 'sweeper queued callback deliveries that were due without a job');
  }

  /**
   * Unlocks the jobs held, for longer than the staleness bound, by
   * graphile-worker pools that no live worker answers for; returns those
   * pools' ids. A live worker holds its registry lock and lists its pool in
   * `workers.job_lockers` (WorkerRegistry); a SIGKILLed worker's lock is gone
   * at once, and a worker whose runner stopped lists its new pool only. So a
   * callback delivery or collector pass taken by a dead worker runs again
   * within seconds, instead of after graphile-worker's 4-hour lock timeout.
   * Every Slipway job may run twice (see SlipwayWorker), so freeing a job
   * whose worker was merely slow to register costs a repeated run at worst.
   * Reads graphile-worker's public `jobs` view and calls its public
   * `force_unlock_workers`.
   */
  async freeOrphanedJobs(): Promise<string[]> {
    const { rows } = await sql<{ locker: string }>`
      with
      held as materialized (
        select l.objid::bigint as key2
        from pg_locks l
        where l.locktype = 'advisory' and l.objsubid = 2 and l.granted
          and l.classid = ${WORKER_LOCK_CLASS}::oid
          and l.database = (select oid from pg_database where datname = current_database())
      ),
      live as (
        select unnest(w.job_lockers) as locker
        from workers w
        -- pg_locks shows the int4 key as an unsigned oid.
        where (hashtext(w.id)::bigint & 4294967295) in (select h.key2 from held h)
      )
      select distinct j.locked_by as locker
      from graphile_worker.jobs j
      where j.locked_by is not null
        and j.locked_at < now() - make_interval(secs => ${this.staleAfterMs / 1000})
        and j.locked_by not in (select l.locker from live l)
    `.execute(this.db);
    const lockers = rows.map((row) => row.locker);
    if (lockers.length > 0) await sql`select graphile_worker.force_unlock_workers(${lockers}::text[])`.execute(this.db);
    return lockers;
  }

  /** One pass of waking; returns how many objects it woke. */
  async sweep(): Promise<number> {
    const { rows } = await sql<{ kind: ObjectKind; id: number }>`
      with
      -- Advisory locks held in this database, read once per pass: pg_locks
      -- lists the whole server's locks and is dear to read, and another
      -- Slipway database on the same server holding the same key must not
      -- hide this object from us.
      held as materialized (
        select (l.classid::bigint << 32) | l.objid::bigint as lock_key
        from pg_locks l
        where l.locktype = 'advisory' and l.objsubid = 1
          and l.database = (select oid from pg_database where datname = current_database())
      ),
      -- The oldest stale commands only: under a backlog nearly every queued
      -- command is stale and waits its turn behind a due job, and looking at
      -- all of them every pass would cost as much as the drains. A stranded
      -- object further down is reached once the ones ahead have drained.
      stale as (
        select c.target_kind as kind, c.target_id as id
        from commands c
        where c.status in ('queued', 'running')
          and c.not_before < now() - make_interval(secs => ${this.staleAfterMs / 1000})
        order by c.not_before
        limit ${MAX_STALE_LOOKED_AT}
      )
      select distinct s.kind, s.id
      from stale s
      where object_lock_key(s.kind, s.id) not in (select h.lock_key from held h)
        -- An object with a wake-up row is not stranded: a drain takes it when
        -- it is due (a backlog's objects wait their turn there).
        and not exists (
          select 1 from drain_wakeups w where w.target_kind = s.kind and w.target_id = s.id
        )
      limit ${MAX_WAKES_PER_PASS}
    `.execute(this.db);
    await wakeObjects(this.db, rows);
    if (rows.length > 0) await signalWorkersQuietly(this.db);
    return rows.length;
  }
}
