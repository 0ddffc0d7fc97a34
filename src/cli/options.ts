import { type Command, Option } from 'commander';
import { z } from 'zod';
import { LIST_ORDERS, type ListOrder } from '../read/listOrder.ts';
import { LIVE } from '../read/stateFilter.ts';
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
  readonly order: ListOrder;
}

/** Lists show the newest rows first: what just happened is what an operator looks for. */
export function addPageOptions(command: Command): Command {
  return command
    .option('--limit <n>', 'at most this many rows', parseWith(countBetween(1, 1000)), DEFAULT_LIMIT)
    .option('--after <id>', "only rows after this id in the list's order (the next page)", parseWith(PositiveId))
    .option('--order <newest|oldest>', 'which end of the list comes first', parseWith(z.enum(LIST_ORDERS)), 'newest');
}

/** Options of a list of objects that end (leases, resources). */
export interface StateListOptions extends PageOptions {
  readonly state?: string;
  readonly all?: boolean;
}

/**
 * `--state` and `--all` on a list of `noun`: without either it shows only the
 * live ones (not yet destroyed), as an operator at a busy system wants.
 */
export function addStateOptions(command: Command, noun: string, states: z.ZodType<string>): Command {
  return command
    .option('--state <state>', `only ${noun} in this state, or "${LIVE}" (the default: all but destroyed ones)`, parseWith(states))
    .addOption(new Option('--all', `${noun} in every state, destroyed ones too`).conflicts('state'));
}

/** The state filter `--state` and `--all` ask for (see addStateOptions). */
export function stateFilter(options: StateListOptions): string | undefined {
  return options.all ? undefined : (options.state ?? LIVE);
}
