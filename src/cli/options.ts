import type { Command } from 'commander';
import { countBetween, parseWith, PositiveId, Seconds, textUpTo } from './parsers.ts';

/** How long a synchronous command waits by default for its command tree, in seconds. */
const DEFAULT_TIMEOUT_S = 120;
const DEFAULT_LIMIT = 50;

/** Options of every command that appends commands and then waits for them. */
export interface WaitOptions {
  readonly wait: boolean;
  /** Seconds. */
  readonly timeout: number;
  readonly reason?: string;
}

export function addWaitOptions(command: Command): Command {
  return command
    .option('--no-wait', 'return as soon as the command is queued')
    .option('--timeout <seconds>', 'how long to wait for the command and all it causes', parseWith(Seconds), DEFAULT_TIMEOUT_S)
    .option('--reason <text>', 'why: recorded on the command', parseWith(textUpTo(1000)));
}

/** Options of every list. */
export interface PageOptions {
  readonly limit: number;
  readonly after?: number;
}

export function addPageOptions(command: Command): Command {
  return command
    .option('--limit <n>', 'at most this many rows', parseWith(countBetween(1, 1000)), DEFAULT_LIMIT)
    .option('--after <id>', 'only rows after this id (the next page)', parseWith(PositiveId));
}
