import pg from 'pg';

/**
 * Connections one test file may hold at its peak: the chaos files run up to
 * four worker processes (each a drain pool and a graphile-worker pool) beside
 * a client pool of their own, some 80 in all; the margin covers the test
 * setup's own connections.
 */
const PEAK_CONNECTIONS_PER_FILE = 90;
/** The machine has two cores: more files at once only queue for them. */
const MOST_FILES_AT_ONCE = 2;

/**
 * How many test files run at once: as many as the server's
 * `max_connections` holds at their peak, at most two. The embedded server
 * the tests start allows 300 (EmbeddedDatabase); a server in DATABASE_URL
 * is asked, so one with PostgreSQL's default of 100 runs the files one at a
 * time instead of refusing a connection ("too many clients") mid-test.
 */
export async function filesAtOnce(databaseUrl = process.env.DATABASE_URL): Promise<number> {
  if (!databaseUrl) return MOST_FILES_AT_ONCE;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ max_connections: string }>('show max_connections');
    const held = Math.floor(Number(rows[0]!.max_connections) / PEAK_CONNECTIONS_PER_FILE);
    return Math.max(1, Math.min(MOST_FILES_AT_ONCE, held));
  } finally {
    await client.end();
  }
}
