import type { CompiledQuery } from 'kysely';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { afterCommitWasSent } from '../db/connectionFailure.ts';
import type { Db } from '../db/Database.ts';
import { simpleQueryText } from '../db/preparedText.ts';
import type { Logger } from '../log.ts';
import { admit } from './admissionChecks.ts';
import { drainJobKey } from '../db/objectTables.ts';
import { signalWorkersQuietly } from './wakeSignal.ts';
import {
  appendBatchStatement,
  type AppendedRow,
  appendInTransaction,
  type AppendOptions,
  type AppendRequest,
  type AppendResult,
  appendResult,
  type BatchedAppend,
  batchedAppend,
} from './appendCommand.ts';

/** The most appends sent in one transaction. */
const MAX_BATCH = 64;
/**
 * The most batches under way at once, each on a pool connection of its own,
 * so appends never take the whole pool from the server's reads. Requests
 * that arrive while a batch is under way wait for it and go together in the
 * next.
 */
const MAX_IN_FLIGHT = 2;
/**
 * How long a batch may be under way before a second is sent beside it. A
 * batch's round trip and durable commit take a millisecond or two; one that
 * takes longer is most likely waiting for a lock (an append share-locks its
 * object's row, which a drain holds while it decides), and the requests
 * behind it should not all wait for that lock. Sending the second at once
 * instead would halve the batches, and a batch's cost is mostly per batch:
 * more CPU per append, and so less throughput on a busy machine.
 */
const SECOND_BATCH_AFTER_MS = 5;

interface Waiting {
  readonly request: AppendRequest;
  readonly options: AppendOptions;
  readonly append: BatchedAppend;
  /** The object's wake-up job key: the order its locks are taken in. */
  readonly jobKey: string;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

/**
 * Appends from many concurrent requests (the API's and the web UI's command
 * POSTs) sent to PostgreSQL together: all that arrive while earlier ones are
 * under way go in ONE transaction and one round trip, as one statement
 * (appendBatchStatement) in which each append still has its own checks and
 * its own answer. A
 * busy server commits a batch where it committed each append, which is most
 * of an append's cost; an idle one sends each request at once, alone.
 *
 * Each append is validated (and admitted) before it waits, so a bad request
 * is refused on its own. The statements answer every expected refusal
 * (missing, busy, rejected) as rows, not errors, so one caller's refusal
 * costs the others nothing. When PostgreSQL fails a batch with an error of
 * its own, the whole batch was rolled back (the `commit` at its end never
 * ran), and each append is made again on its own, one at a time, so every
 * caller gets exactly its own answer. When the connection fails instead, the
 * commit may or may not have happened: making the appends again could write
 * them twice, so every caller gets a MayHaveCommittedError saying so.
 *
 * Locks: an append share-locks its object's row and writes its wake-up row
 * (slipway_append_command). A batch holds those of every object before it
 * until it commits, so a batch has only objects of one kind (an append on a
 * resource would wait for the resource's row, which a drain holds while it
 * decides), in the order of their wake-up keys, the order in which every
 * drain's commit writes the wake-ups it makes (see wakeObjects). Appends to
 * one object keep their order, so a duplicate release still coalesces into
 * the first. PostgreSQL breaks any deadlock that remains: a batch it aborts
 * is made again one append at a time. Once a batch has committed, workers
 * are signalled (wakeSignal.ts), once for the whole batch, while its callers
 * are answered.
 */
export class AppendBatcher {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;
  /** When the newest batch under way was sent (performance.now()). */
  private lastSentAt = 0;
  /** Set while waiting appends wait for the batch under way to have taken SECOND_BATCH_AFTER_MS. */
  private secondBatchTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  async append(request: AppendRequest, options: AppendOptions): Promise<AppendResult> {
    const append = batchedAppend(request, options);
    if (options.fromOutside) await admit(this.db, request);
    return new Promise<AppendResult>((resolve, reject) => {
      this.waiting.push({ request, options, append, jobKey: drainJobKey(request.target), resolve, reject });
      this.sendWaiting();
    });
  }

  private sendWaiting(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.waiting.length > 0) {
      if (this.inFlight > 0) {
        const wait = this.lastSentAt + SECOND_BATCH_AFTER_MS - performance.now();
        if (wait > 0) {
          this.secondBatchTimer ??= setTimeout(() => {
            this.secondBatchTimer = undefined;
            this.sendWaiting();
          }, wait);
          return;
        }
      }
      clearTimeout(this.secondBatchTimer);
      this.secondBatchTimer = undefined;
      const batch = this.takeBatch();
      this.inFlight++;
      this.lastSentAt = performance.now();
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.sendWaiting();
      });
    }
  }

  /** The oldest waiting append and up to MAX_BATCH − 1 more on objects of its kind, in arrival order; the rest wait. */
  private takeBatch(): Waiting[] {
    const kind = this.waiting[0]!.request.target.kind;
    const batch: Waiting[] = [];
    for (let n = 0; n < this.waiting.length && batch.length < MAX_BATCH; ) {
      if (this.waiting[n]!.request.target.kind === kind) batch.push(...this.waiting.splice(n, 1));
      else n++;
    }
    return batch;
  }

  private async send(batch: readonly Waiting[]): Promise<void> {
    // Stable: appends to one object keep their arrival order.
    const ordered = [...batch].sort((a, b) => (a.jobKey < b.jobKey ? -1 : a.jobKey > b.jobKey ? 1 : 0));
    let rows: AppendedRow[][];
    try {
      rows = await this.inOneTransaction(appendBatchStatement(ordered.map((w) => w.append)), ordered.length);
    } catch (error) {
      if (!(error instanceof RolledBack)) {
        const failure = afterCommitWasSent(error);
        for (const w of ordered) w.reject(failure);
        return;
      }
      this.log.info({ err: error.cause, appends: ordered.length }, 'a batch of appends failed; making them one at a time');
      for (const w of ordered) await appendInTransaction(this.db, w.request, w.options).then(w.resolve, w.reject);
      return;
    }
    // Not awaited: the signal is a hint sent after the commit (the poll is
    // the backstop), and neither the callers' answers nor the next batch,
    // which may start as soon as this one has committed, need wait for its
    // round trip.
    void signalWorkersQuietly(
      this.db,
      ordered.map((w) => w.request.target),
    );
    await Promise.all(ordered.map((w, n) => appendResult(this.db, w.request, w.options, rows[n]!).then(w.resolve, w.reject)));
  }

  /**
   * Runs the batch's statement in a transaction of its own in one round
   * trip; the rows of each of its `count` appends, in order. Throws
   * RolledBack when nothing of it can have been committed: it failed before
   * it was sent, or PostgreSQL answered it with an error (which ends the
   * query before its `commit`, or is the commit's own failure). Any other
   * failure is thrown as it is.
   */
  private async inOneTransaction(statement: CompiledQuery<AppendedRow & { n: number }>, count: number): Promise<AppendedRow[][]> {
    let client: pg.PoolClient | undefined;
    let sent = false;
    try {
      client = await this.pool.connect();
      const text = await simpleQueryText(client, ['begin', statement, 'commit']);
      sent = true;
      const results = (await client.query(text)) as unknown as pg.QueryResult<AppendedRow & { n: number }>[];
      client.release();
      const rows: AppendedRow[][] = Array.from({ length: count }, () => []);
      for (const { n, ...row } of results[1]!.rows) rows[n - 1]!.push(row);
      return rows;
    } catch (error) {
      // A failed batch left its transaction aborted (and perhaps a stale
      // prepared statement): the connection is discarded, not reused.
      client?.release(error as Error);
      throw !sent || (error instanceof pg.DatabaseError && error.severity === 'ERROR') ? new RolledBack(error) : error;
    }
  }
}

/** A batch that failed with nothing of it committed (see inOneTransaction). */
class RolledBack extends Error {
  override name = 'RolledBack';
  constructor(override readonly cause: unknown) {
    super(`batch of appends rolled back: ${(cause as Error).message}`);
  }
}
