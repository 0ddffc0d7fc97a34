import { CommanderError } from 'commander';
import { ConfigError } from '../config.ts';
import { SlipwayError } from '../domain/errors.ts';

/** The CLI's exit codes. */
export const EXIT = {
  ok: 0,
  /** A command failed, a wait timed out, or something unexpected broke. */
  failed: 1,
  /** Bad arguments or configuration: nothing was done. */
  usage: 2,
  notFound: 3,
  /** The object's state or queue refused the request. */
  conflict: 4,
  /** Remote mode: the API refused the token (401) or what its role may do (403). */
  denied: 5,
  /** SIGINT/SIGTERM stopped a wait; the commands carry on. */
  interrupted: 130,
  /** Stdout closed under the CLI (e.g. `| head -1`): as a process killed by SIGPIPE; a wait's commands carry on. */
  outputClosed: 141,
} as const;
type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const BY_SLIPWAY_CODE: Record<SlipwayError['code'], ExitCode> = {
  invalid_input: EXIT.usage,
  not_found: EXIT.notFound,
  conflict: EXIT.conflict,
  unsupported_version: EXIT.conflict,
  over_quota: EXIT.conflict,
};

/**
 * A failure the CLI itself reports: a failed or unfinished command tree, a
 * missing schema, or (remote mode) the API's refusal, whose `code` and
 * `details` it keeps.
 */
export class CliFailure extends Error {
  override name = 'CliFailure';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly error: { readonly code?: string; readonly details?: Record<string, unknown> } = {},
  ) {
    super(message);
  }
}

/**
 * The CLI exits with a status it passes on (`lease run`: its command's, or
 * one of its own), having said on stderr all there is to say: nothing more
 * is printed, on stdout least of all.
 */
export class PassedOnExit extends Error {
  override name = 'PassedOnExit';
  constructor(readonly exitCode: number) {
    super(`exit status ${exitCode}`);
  }
}

/** The error's code, as the API would name it, for a failure the CLI reports by exit code alone. */
const CODE_BY_EXIT: Readonly<Record<number, string>> = {
  [EXIT.failed]: 'failed',
  [EXIT.usage]: 'invalid_input',
  [EXIT.notFound]: 'not_found',
  [EXIT.conflict]: 'conflict',
  [EXIT.denied]: 'forbidden',
  [EXIT.interrupted]: 'interrupted',
};

export interface ExitStatus {
  readonly exitCode: number;
  /** The one line to print on stderr; null when commander already printed it. */
  readonly message: string | null;
  /** What `--json` prints on stdout: the API's error shape (null: nothing). */
  readonly body: { readonly code: string; readonly message: string; readonly details: Record<string, unknown> } | null;
  /** True for errors nobody anticipated (their stack is worth showing when debugging). */
  readonly unexpected: boolean;
}

/** THE mapping from whatever stopped a command to its exit code and message. */
export function exitStatusOf(error: unknown): ExitStatus {
  if (error instanceof PassedOnExit) return { exitCode: error.exitCode, message: null, body: null, unexpected: false };
  if (error instanceof CommanderError) {
    // Commander has printed the usage error (or the help) itself.
    const body = { code: 'invalid_input', message: oneLine(error.message.replace(/^error: /, '')), details: { commander: error.code } };
    return { exitCode: error.exitCode === 0 ? EXIT.ok : EXIT.usage, message: null, body, unexpected: false };
  }
  if (error instanceof SlipwayError) {
    const body = { code: error.code, message: error.message, details: error.details };
    return { exitCode: BY_SLIPWAY_CODE[error.code], message: error.message, body, unexpected: false };
  }
  if (error instanceof ConfigError) {
    return {
      exitCode: EXIT.usage,
      message: error.message,
      body: { code: 'invalid_configuration', message: error.message, details: {} },
      unexpected: false,
    };
  }
  if (error instanceof CliFailure) {
    const body = { code: error.error.code ?? CODE_BY_EXIT[error.exitCode] ?? 'failed', message: error.message, details: error.error.details ?? {} };
    return { exitCode: error.exitCode, message: error.message, body, unexpected: false };
  }
  if ((error as { code?: unknown }).code === UNDEFINED_TABLE) {
    // A database Slipway never migrated (a new embedded server, or the wrong DATABASE_URL).
    const message = `the database has no Slipway schema (${(error as Error).message}): run \`slipway db migrate\`, or \`npm start\`, which migrates`;
    return { exitCode: EXIT.failed, message, body: { code: 'schema_missing', message, details: {} }, unexpected: false };
  }
  const message = oneLine(error instanceof Error ? error.message : String(error));
  return { exitCode: EXIT.failed, message, body: { code: 'internal', message, details: {} }, unexpected: true };
}

/** PostgreSQL's SQLSTATE for a table that does not exist. */
const UNDEFINED_TABLE = '42P01';

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
