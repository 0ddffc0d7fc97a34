import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../../migrations/schema.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { EmbeddedDatabase } from './EmbeddedDatabase.ts';
import { PreparingClient } from './PreparingClient.ts';
import { withSessionSettings } from './sessionSettings.ts';

// Object and command ids are bigint identities; they stay far below 2^53, so
// this project's pools read int8 as a JS number. The override is per pool
// (not global) so graphile-worker's own pool keeps its string job ids.
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

export type Db = Kysely<DB>;

/** The longest a closing process waits for its connections to close before it stops its embedded server anyway. */
const CLOSE_WAIT_MS = 5000;

/** A connection pool and its typed query builder, plus the embedded server if we started one. */
export class Database {
  private constructor(
    readonly url: string,
    readonly pool: pg.Pool,
    readonly db: Db,
    private readonly embedded: EmbeddedDatabase | undefined,
    /** The pool's connections not yet closed (see close()). */
    private readonly open: ReadonlySet<pg.Client>,
  ) {}

  /** The database of a process started from its configuration (the service, the CLI): it keeps its connections. */
  static async open(config: Config, log: Logger, options: { poolSize?: number } = {}): Promise<Database> {
    const embedded = config.DATABASE_URL ? undefined : await EmbeddedDatabase.open(config.homeDir, log);
    const url = config.DATABASE_URL ?? embedded!.url;
    return Database.fromUrl(url, log, { ...options, keepConnections: true }, embedded);
  }

  /**
   * `keepConnections`: a connection, once opened, stays open while idle
   * (up to the pool's size), where node-postgres closes it after 10 idle
   * seconds. A long-running process wants that: each new connection costs
   * a PostgreSQL backend's start, and the drain's and the appends' prepared
   * statements again, so the first burst after every quiet spell would
   * wait for a round of them, as a latency spike. Test databases do
   * without, so a run of many test files holds no more connections than it
   * uses.
   */
  static fromUrl(url: string, log: Logger, options: { poolSize?: number; keepConnections?: boolean } = {}, embedded?: EmbeddedDatabase): Database {
    const max = options.poolSize ?? 10;
    const pool = new pg.Pool({
      connectionString: withSessionSettings(url),
      max,
      min: options.keepConnections ? max : 0,
      types,
      Client: PreparingClient,
    });
    // An idle client losing its connection must not crash the process.
    pool.on('error', (error) => log.warn({ err: error }, 'idle database connection failed'));
    const open = new Set<pg.Client>();
    pool.on('connect', (client) => {
      open.add(client);
      client.once('end', () => open.delete(client));
      client.on('error', (error) => log.warn({ err: error }, 'database connection failed'));
    });
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    return new Database(url, pool, db, embedded, open);
  }

  /**
   * Opens a pool that keeps its connections (keepConnections) to its full
   * size now, so a server's first burst of requests finds them open rather
   * than each starting a backend, which would make the first answers of a
   * fresh server the slowest it gives. Best effort: a connection that
   * cannot be opened now is opened when first needed. A pool that lets idle
   * connections go is left as it is.
   */
  async openConnections(): Promise<void> {
    const { max, min } = this.pool.options;
    if (!max || min !== max) return;
    // Only the missing ones: asking for more than the pool holds would wait for a release that comes after.
    const missing = max - this.pool.totalCount;
    const opened = await Promise.allSettled(Array.from({ length: Math.max(0, missing) }, () => this.pool.connect()));
    for (const client of opened) if (client.status === 'fulfilled') client.value.release();
  }

  /** True when this process started the embedded server (it stops with this process's close). */
  get startedEmbeddedServer(): boolean {
    return this.embedded?.owned ?? false;
  }

  async close(): Promise<void> {
    await this.db.destroy();
    // Kysely ends the pool only if it ran a query itself: one used only through `pool` is ended here.
    if (!this.pool.ending) await this.pool.end();
    if (this.embedded?.owned) {
      // The pool's end resolves as its connections are told to close, not
      // once they have: a server stopped meanwhile terminates them, and each
      // would log that as a failure.
      await Promise.race([
        Promise.all([...this.open].map((client) => new Promise((resolve) => client.once('end', resolve)))),
        sleep(CLOSE_WAIT_MS, undefined, { ref: false }),
      ]);
    }
    await this.embedded?.stop();
  }
}
