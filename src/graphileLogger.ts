import { Logger as GraphileLogger } from 'graphile-worker';
import type { Logger } from './log.ts';

/** Our level for each of graphile-worker's; any other (debug) is trace. Its info lines are routine. */
const LEVELS: Readonly<Record<string, 'error' | 'warn' | 'debug'>> = { error: 'error', warning: 'warn', info: 'debug' };

/** Routes graphile-worker's log lines into our pino logger. */
export function graphileLogger(log: Logger): GraphileLogger {
  const child = log.child({ component: 'graphile-worker' });
  return new GraphileLogger(() => (level, message, meta) => {
    const method = LEVELS[level] ?? 'trace';
    child[method](meta ?? {}, message);
  });
}
