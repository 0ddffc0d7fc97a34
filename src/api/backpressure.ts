import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import type { QueueFullError } from '../queue/appendCommand.ts';
import { ApiError } from './errors.ts';

export interface BackpressureLimits {
  /** Commands queued or running on one object. */
  readonly queueDepth: number;
  /** Commands queued in all. */
  readonly backlog: number;
}

/** How long the global backlog count is reused: counting a large backlog on every request would add to the load it measures. */
const BACKLOG_SAMPLE_MS = 1000;

/**
 * Refuses new work, before anything is written, when an object's queue or
 * the whole backlog is over its limit: 429 for one busy object (the caller
 * should slow down on it), 503 for the whole service (everyone should).
 * Both say when to retry.
 */
export class Backpressure {
  private sampledAt = 0;
  private sampled = 0;
  /** The count under way on the pool: concurrent requests that find the sample stale wait for it instead of each counting again. */
  private counting: Promise<number> | undefined;

  constructor(private readonly limits: BackpressureLimits) {}

  /** Checks the global backlog (every POST that queues work). */
  async assertBacklogRoom(db: Db): Promise<void> {
    const backlog = await this.backlog(db);
    if (backlog >= this.limits.backlog) {
      throw new ApiError(
        'backlog_full',
        `Slipway has ${backlog} commands queued (limit ${this.limits.backlog}); retry later`,
        { backlog, limit: this.limits.backlog },
        5,
      );
    }
  }

  /** The per-object limit, for the append to check in its own statement (AppendOptions.queueLimit). */
  get queueDepth(): number {
    return this.limits.queueDepth;
  }

  /** The append's refusal of a full queue, as the API's answer: 429, retry in a second. */
  queueFull(error: QueueFullError): ApiError {
    const { target, limit } = error;
    return new ApiError('too_many_requests', `${error.message} (limit ${limit}); retry later`, { target, depth: limit, limit }, 1);
  }

  private backlog(db: Db): Promise<number> {
    if (Date.now() - this.sampledAt < BACKLOG_SAMPLE_MS) return Promise.resolve(this.sampled);
    // A caller inside a transaction (an idempotent request) holds a pool
    // connection the shared count may be waiting for, so it never waits for
    // that count: it takes the last sample while one is under way, else
    // counts in its own transaction.
    if (db.isTransaction) return this.counting ? Promise.resolve(this.sampled) : this.count(db);
    this.counting ??= this.count(db).finally(() => {
      this.counting = undefined;
    });
    return this.counting;
  }

  private async count(db: Db): Promise<number> {
    const startedAt = Date.now();
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from (
        select 1 from commands where status in ('queued', 'running') limit ${this.limits.backlog}
      ) as backlog
    `.execute(db);
    this.sampled = rows[0]!.n;
    this.sampledAt = startedAt;
    return this.sampled;
  }
}
