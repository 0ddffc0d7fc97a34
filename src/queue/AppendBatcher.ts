import type { CompiledQuery } from 'kysely';
import type pg from 'pg';
import type { Db } from '../db/Database.ts';
import { simpleQueryText } from '../db/preparedText.ts';
import { admit } from './admissionChecks.ts';
import {
  type AppendedRow,
  appendInTransaction,
  type AppendOptions,
  type AppendRequest,
  type AppendResult,
  appendResult,
  appendStatement,
} from './appendCommand.ts';

/** The most appends sent in one transaction. */
const MAX_BATCH = 64;
/**
 * The most batches under way at once, each on a pool connection of its own,
 * so appends never take the whole pool from the server's reads. Requests
 * that arrive while all are busy wait for the next free one and go together.
 */
const MAX_IN_FLIGHT = 2;

interface Waiting {
  readonly request: AppendRequest;
  readonly options: AppendOptions;
  readonly statement: CompiledQuery<AppendedRow>;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

/**
 * Appends from many concurrent requests (the API's and the web UI's command
 * POSTs) sent to PostgreSQL together: all that arrive while earlier ones are
 * under way go in ONE transaction and one round trip, each still its own
 * statement (appendStatement) with its own checks and its own answer. A
 * busy server commits a batch where it committed each append, which is most
 * of an append's cost; an idle one sends each request at once, alone.
 *
 * Each append is validated (and admitted) before it waits, so a bad request
 * is refused on its own. The statements answer every expected refusal
 * (missing, busy, rejected) as rows, not errors, so one caller's refusal
 * costs the others nothing. Anything else that fails a batch (a deadlock, a
 * statement a migration changed) rolls all of it back, and each append is
 * then made again on its own, so every caller gets exactly its own answer.
 *
 * Appends to one object keep their order in a batch, so a duplicate
 * release still coalesces into the first one. The batch is sorted by
 * object: every batch takes the objects' locks (their rows, their wake-up
 * jobs) in the same order, so two batches never deadlock on each other.
 */
export class AppendBatcher {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(
    private readonly pool: pg.Pool,
    private readonly db: Db,
  ) {}

  async append(request: AppendRequest, options: AppendOptions): Promise<AppendResult> {
    const statement = appendStatement(request, options).compile(this.db);
    if (options.fromOutside) await admit(this.db, request.target, request.kind, (request.payload ?? {}) as Record<string, unknown>);
    return new Promise<AppendResult>((resolve, reject) => {
      this.waiting.push({ request, options, statement, resolve, reject });
      this.sendWaiting();
    });
  }

  private sendWaiting(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.sendWaiting();
      });
    }
  }

  private async send(batch: readonly Waiting[]): Promise<void> {
    const ordered = [...batch].sort((a, b) => compareTargets(a.request, b.request));
    let rows: AppendedRow[][];
    try {
      rows = await this.inOneTransaction(ordered.map((w) => w.statement));
    } catch {
      await Promise.all(ordered.map((w) => appendInTransaction(this.db, w.request, w.options).then(w.resolve, w.reject)));
      return;
    }
    await Promise.all(ordered.map((w, n) => appendResult(this.db, w.request, w.options, rows[n]!).then(w.resolve, w.reject)));
  }

  /** Runs the statements in one transaction in one round trip; each one's rows, in order. */
  private async inOneTransaction(statements: readonly CompiledQuery<AppendedRow>[]): Promise<AppendedRow[][]> {
    const client = await this.pool.connect();
    let failure: Error | undefined;
    try {
      const text = await simpleQueryText(client, ['begin', ...statements, 'commit']);
      const results = (await client.query(text)) as unknown as pg.QueryResult<AppendedRow>[];
      return results.slice(1, -1).map((result) => result.rows);
    } catch (error) {
      failure = error as Error;
      throw error;
    } finally {
      // A failed batch left its transaction aborted (and perhaps a stale
      // prepared statement): the connection is discarded, not reused.
      client.release(failure);
    }
  }
}

const compareTargets = (a: AppendRequest, b: AppendRequest) =>
  a.target.kind === b.target.kind ? a.target.id - b.target.id : a.target.kind < b.target.kind ? -1 : 1;
