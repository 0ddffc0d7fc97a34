import { Logger as GraphileLogger } from 'graphile-worker';
import type { Logger } from '../log.ts';

/** Routes graphile-worker's log lines into our pino logger. */
export function graphileLogger(log: Logger): GraphileLogger {
  const child = log.child({ component: 'graphile-worker' });
  return new GraphileLogger(() => (level, message, meta) => {
    const method = level === 'error' ? 'error' : level === 'warning' ? 'warn' : level === 'info' ? 'debug' : 'trace';
    child[method](meta ?? {}, message);
  });
}
