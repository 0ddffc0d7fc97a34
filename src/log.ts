import { pino, type Logger } from 'pino';

/** One JSON logger per process; children carry command and object ids. */
export function createLogger(level: string, name = 'slipway'): Logger {
  return pino({ name, level, base: { pid: process.pid } });
}

export type { Logger };
