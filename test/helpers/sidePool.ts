import pg from 'pg';

/**
 * A pool of a test's own beside its database's, ended by the test.
 * `pool.end()` resolves once its connections are told to close, not once
 * they have: the drop of the test's database right after (with force)
 * may terminate one still closing, and the pool reports that as an error
 * of an idle connection, which would be uncaught. That one is the drop's;
 * any error before the pool is ending is thrown.
 */
export function sidePool(url: string, options: Omit<pg.PoolConfig, 'connectionString'> = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, ...options });
  pool.on('error', (error) => {
    if (!pool.ending) throw error;
  });
  return pool;
}
