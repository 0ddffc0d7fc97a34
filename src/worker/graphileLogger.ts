import { Logger as GraphileLogger } from 'graphile-worker';
import type { Logger } from '../log.ts';

/**
 * Its warning that its pool is smaller than its concurrency is expected
 * here, and said once at debug level: a worker runs several jobs per drain
 * connection (see workerJobConcurrency), most of them waiting in a batch,
 * and with the local queue graphile-worker takes and completes jobs in
 * batches, so its own pool is rarely busy.
 */
const EXPECTED_WARNING = /^WARNING: having maxPoolSize \(\d+\) smaller than concurrency/;

/** Our level for each of graphile-worker's; any other (debug) is trace. Its info lines are routine. */
const LEVELS: Readonly<Record<string, 'error' | 'warn' | 'debug'>> = { error: 'error', warning: 'warn', info: 'debug' };

/** Routes graphile-worker's log lines into our pino logger. */
export function graphileLogger(log: Logger): GraphileLogger {
  const child = log.child({ component: 'graphile-worker' });
  return new GraphileLogger(() => (level, message, meta) => {
    const method = level === 'warning' && EXPECTED_WARNING.test(message) ? 'debug' : (LEVELS[level] ?? 'trace');
    child[method](meta ?? {}, message);
  });
}
