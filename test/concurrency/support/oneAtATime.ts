import pg from 'pg';
import { inject } from 'vitest';

/**
 * These tests each run several worker processes flat out, with dozens of
 * database connections. Run side by side on a small machine they would
 * starve each other of CPU and of PostgreSQL's connection slots, so each test
 * file holds a session advisory lock on the shared server while it runs:
 * concurrency test files take turns, other test files are unaffected.
 * Returns the function that lets go.
 */
export async function takeTurn(): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: inject('adminUrl') });
  await client.connect();
  await client.query(`select pg_advisory_lock(hashtext('slipway concurrency tests'))`);
  return () => client.end();
}

/** How long a file may wait for its turn, plus its own work. */
export const TURN_TIMEOUT_MS = 300_000;
