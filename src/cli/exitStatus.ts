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
};

/** A failure the CLI itself reports: a failed or unfinished command tree, a missing schema. */
export class CliFailure extends Error {
  override name = 'CliFailure';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
  }
}

export interface ExitStatus {
  readonly exitCode: number;
  /** The one line to print on stderr; null when commander already printed it. */
  readonly message: string | null;
  /** True for errors nobody anticipated (their stack is worth showing when debugging). */
  readonly unexpected: boolean;
}

/** THE mapping from whatever stopped a command to its exit code and message. */
export function exitStatusOf(error: unknown): ExitStatus {
  if (error instanceof CommanderError) {
    // Commander has printed the usage error (or the help) itself.
    return { exitCode: error.exitCode === 0 ? EXIT.ok : EXIT.usage, message: null, unexpected: false };
  }
  if (error instanceof SlipwayError) return { exitCode: BY_SLIPWAY_CODE[error.code], message: error.message, unexpected: false };
  if (error instanceof ConfigError) return { exitCode: EXIT.usage, message: error.message, unexpected: false };
  if (error instanceof CliFailure) return { exitCode: error.exitCode, message: error.message, unexpected: false };
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: EXIT.failed, message: oneLine(message), unexpected: true };
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
