import type { Db } from '../db/Database.ts';
import { readCommandTrees, type TreeQuery, type TreeRead } from './commandTree.ts';

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
 */
export class CommandTreeReads {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(private readonly db: Db) {}

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
    try {
      const reads = await readCommandTrees(
        this.db,
        batch.map((w) => w.query),
      );
      for (const [n, w] of batch.entries()) w.resolve(reads[n]!);
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }
}
