import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.ts';
import type { Database, Db } from '../db/Database.ts';
import type { Logger } from '../log.ts';
import { CliFailure, EXIT } from './exitStatus.ts';
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
  /**
   * The command runs Slipway or keeps its database (`start`, `db migrate`):
   * it runs where it is run, whatever SLIPWAY_URL says. Every other command
   * that opens the database refuses to when SLIPWAY_URL is set, unless
   * given --local: the user meant that server, which it would not reach.
   */
  readonly runsHere?: true;
}

/**
 * Opens the database (reusing a running embedded server, or starting one),
 * runs `work`, and always closes it again, which also stops an embedded
 * server this process started.
 */
export async function withSession<T>(command: Command, work: (session: Session) => Promise<T>, options: SessionOptions = {}): Promise<T> {
  const config = loadConfig({ LOG_LEVEL: options.logLevel ?? 'warn', ...process.env });
  if (config.SLIPWAY_URL !== undefined && !options.runsHere && command.optsWithGlobals<{ local?: boolean }>().local !== true) {
    throw new CliFailure(
      `\`slipway ${commandPath(command)}\` works on the database directly and has no remote mode, so it would not go to SLIPWAY_URL (${config.SLIPWAY_URL}); run it where Slipway's database is, with --local to confirm, or unset SLIPWAY_URL`,
      EXIT.usage,
    );
  }
  // Loaded here, not with the module: every call declares every subcommand,
  // and remote mode and the calls that never open the database do without them.
  const [{ pino }, { Database }] = await Promise.all([import('pino'), import('../db/Database.ts')]);
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

/** `blueprint create`: the command's name under the program's. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** The command's output, JSON or text per the global --json. */
export function outputOf(command: Command): Output {
  return new Output(command.optsWithGlobals<{ json?: boolean }>().json === true);
}
