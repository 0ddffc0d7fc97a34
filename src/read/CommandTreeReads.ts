import type pg from 'pg';
import { GENERIC_PLANS } from '../db/genericPlans.ts';
import { simpleQueryText } from '../db/preparedText.ts';
import { commandTreesStatement, type TreeQuery, type TreeRead, treesRead } from './commandTree.ts';

/** The most trees read in one statement. */
const MAX_BATCH = 128;
/** The most reads under way at once, each on a pool connection: the rest of the pool stays for appends and pages. */
const MAX_IN_FLIGHT = 2;

interface Waiting {
  readonly query: TreeQuery;
  resolve(read: TreeRead): void;
  reject(error: unknown): void;
}

/**
 * Command trees read for many waiters at once (an API server's requests
 * with `?wait`): the reads asked for while earlier ones are under way go
 * together in ONE statement (readCommandTrees). Under load every waiting
 * request reads its tree again after each notice about it, so one release
 * costs its caller several reads; sent one by one, each would take a pool
 * connection and a round trip of its own, queued beside the appends. An
 * idle server sends each read at once, alone.
 *
 * The statement is prepared on each connection and executed with its
 * generic plan (GENERIC_PLANS), in one round trip: planning the recursive
 * read afresh each time, as an unnamed statement is, costs more than
 * executing it on trees as small as a release's, and every `?wait` answer
 * reads one or more.
 */
export class CommandTreeReads {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(private readonly pool: pg.Pool) {}

  /** The tree of `query.rootId` (empty when there is no such command), as readCommandTree answers it, with its object's state if asked. */
  read(query: TreeQuery): Promise<TreeRead> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ query, resolve, reject });
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
    let client: pg.PoolClient | undefined;
    try {
      client = await this.pool.connect();
      const statement = commandTreesStatement(batch.map((w) => w.query));
      const results = (await client.query(
        await simpleQueryText(client, ['begin', `select ${GENERIC_PLANS}`, statement, 'commit']),
      )) as unknown as pg.QueryResult[];
      client.release();
      const reads = treesRead(batch.length, results[2]!.rows);
      for (const [n, w] of batch.entries()) w.resolve(reads[n]!);
    } catch (error) {
      // A failed read may leave its transaction open: the connection is discarded, not reused.
      client?.release(error as Error);
      for (const w of batch) w.reject(error);
    }
  }
}
