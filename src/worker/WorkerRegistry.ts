import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import { handledVersions } from '../domain/commandKinds.ts';
import { waitBeforeReconnect } from '../health/reconnectDelay.ts';
import type { Logger } from '../log.ts';
import { slipwayVersion } from '../version.ts';

/**
 * The first key of the two-key advisory lock a live worker holds: its own
 * key space, apart from the objects' one-key (bigint) locks. The second key
 * is hashtext(worker id).
 */
export const WORKER_LOCK_CLASS = 0x534c5750; // "SLWP"

/** What the registry reports of the worker's graphile-worker runner. */
export interface RunnerState {
  readonly isUp: boolean;
  readonly lockerIds: readonly string[];
}

/**
 * This worker's row in `workers`: who it is, which command kinds and versions
 * it can run, and which graphile-worker pools' job locks it answers for,
 * kept fresh by a heartbeat. The heartbeat and the row live on a connection
 * of the registry's own, which holds a session advisory lock for as long as
 * the worker lives: PostgreSQL drops it the moment the process dies, so a
 * sweeper can tell a dead worker's job locks from a live one's at once
 * (heartbeats only age). A worker whose runner is down beats no more and
 * gives up that lock, so it stops looking alive while it cannot work; its
 * connection is made again (with the lock) at the first beat after the
 * runner is back. A connection that is lost (a restart, a failover) is
 * made again, and the worker beats, as soon as the database answers, not
 * at the next beat's time. Rows whose heartbeat is long gone are pruned by
 * any live worker.
 */
export class WorkerRegistry {
  readonly id = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private timer: NodeJS.Timeout | undefined;
  private client: pg.PoolClient | undefined;
  private beating: Promise<void> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    private readonly heartbeatMs: number,
    private readonly runner: RunnerState,
  ) {}

  async register(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beatNow(), this.heartbeatMs);
    this.timer.unref();
  }

  /** Beats at once (the runner changed state), unless a beat is under way. */
  beatNow(): Promise<void> {
    this.beating ??= this.beat()
      .catch((error: unknown) => {
        this.dropConnection(error);
        this.log.debug({ err: error }, 'worker heartbeat failed');
      })
      .finally(() => {
        this.beating = undefined;
      });
    return this.beating;
  }

  private async beat(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    if (!this.runner.isUp) {
      // Not alive while it cannot work: the lock goes with the connection.
      this.dropConnection();
      return;
    }
    const client = this.client ?? (await this.connect());
    await client.query(
      `insert into workers (id, hostname, pid, handles, job_lockers, version) values ($1, $2, $3, $4, $5, $6)
       on conflict (id) do update set heartbeat_at = now(), job_lockers = excluded.job_lockers`,
      [this.id, os.hostname(), process.pid, JSON.stringify(handledVersions()), this.runner.lockerIds, slipwayVersion()],
    );
    await client.query(`delete from workers where heartbeat_at < now() - make_interval(secs => $1)`, [(this.heartbeatMs * 10) / 1000]);
  }

  private async connect(): Promise<pg.PoolClient> {
    const client = await this.pool.connect();
    try {
      await client.query('select pg_advisory_lock($1, hashtext($2))', [WORKER_LOCK_CLASS, this.id]);
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    this.client = client;
    const lost = () => {
      if (this.client !== client) return;
      this.dropConnection(new Error('worker registry connection lost'));
      void this.beatAgain();
    };
    client.once('error', lost);
    client.once('end', lost);
    return client;
  }

  /** Beats again after a lost connection, retrying as every long-lived part reconnects, until a beat goes through. */
  private async beatAgain(): Promise<void> {
    for (let attempt = 0; await waitBeforeReconnect(attempt, this.stopping.signal); attempt++) {
      await this.beatNow();
      if (this.client || !this.runner.isUp) return;
    }
  }

  /** Gives the connection back for good (with it, the liveness lock). */
  private dropConnection(error?: unknown): void {
    const client = this.client;
    this.client = undefined;
    // Destroyed, not pooled: the pooled connection must not keep the lock.
    client?.release(error instanceof Error ? error : new Error('worker registry connection dropped'));
  }

  async deregister(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.beating;
    try {
      // On its own connection when it has one: drains past the shutdown
      // grace period may still hold every pooled one.
      await (this.client ?? this.pool).query('delete from workers where id = $1', [this.id]);
    } finally {
      this.dropConnection();
    }
  }
}
