import type { Command } from 'commander';
import { pino } from 'pino';
import { loadConfig, type Config } from '../config.ts';
import { Database, type Db } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { Output } from './output.ts';
import { interrupted } from './shutdown.ts';

/** What one CLI command works with. */
export interface Session {
  readonly config: Config;
  readonly log: Logger;
  readonly database: Database;
  readonly db: Db;
  readonly out: Output;
  /** Aborted by SIGINT/SIGTERM. */
  readonly interrupted: AbortSignal;
}

export interface SessionOptions {
  /** Log level unless LOG_LEVEL says otherwise: quiet for one-shot commands, so their output stays readable. */
  readonly logLevel?: Config['LOG_LEVEL'];
  /** Connections the command's pool may open (default: the pool's own 10). */
  readonly poolSize?: (config: Config) => number;
}

/**
 * Opens the database (reusing a running embedded server, or starting one),
 * runs `work`, and always closes it again, which also stops an embedded
 * server this process started.
 */
export async function withSession<T>(command: Command, work: (session: Session) => Promise<T>, options: SessionOptions = {}): Promise<T> {
  const config = loadConfig({ LOG_LEVEL: options.logLevel ?? 'warn', ...process.env });
  // Logs go to stderr: stdout is for the command's output (and its JSON).
  const log = pino({ name: 'slipway', level: config.LOG_LEVEL, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: true }));
  const out = outputOf(command);
  const database = await Database.open(config, log, { poolSize: options.poolSize?.(config) });
  try {
    return await work({ config, log, database, db: database.db, out, interrupted });
  } finally {
    await database.close();
  }
}

/** The command's output, JSON or text per the global --json. */
export function outputOf(command: Command): Output {
  return new Output(command.optsWithGlobals<{ json?: boolean }>().json === true);
}
