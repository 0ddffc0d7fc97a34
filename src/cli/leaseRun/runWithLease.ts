import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { holdLease, type HeldLease, type HoldOptions } from '../../client/holdLease.ts';
import { loadConfig } from '../../config.ts';
import { formatDuration } from '../../domain/durations.ts';
import { PassedOnExit } from '../exitStatus.ts';
import { leaseRequestOf, type LeaseRequestOptions } from '../leaseRequestOptions.ts';
import { withSession } from '../session.ts';
import { divertSignals } from '../shutdown.ts';
import type { LeaseRequest } from '../transport/Transport.ts';
import { CommandNotStarted, CommandProcess, describeExit, exitStatus, type CommandExit } from './CommandProcess.ts';
import { holdProgressLine, sayOnStderr } from './holdProgress.ts';
import { leaseEnvironment, leaseEnvironmentJson } from './leaseEnvironment.ts';
import { leaseRunFailure } from './leaseRunExit.ts';

export interface RunOptions extends LeaseRequestOptions {
  /** Milliseconds. */
  readonly grace: number;
  readonly jsonEnv?: string;
  readonly quiet?: boolean;
}

/**
 * Holds the lease while the command runs (holdLease: the semantics
 * `withLease` has too). Signals go to the command while it runs; before,
 * they stop the wait and the lease is released. Exits with the command's
 * status, or one of LEASE_RUN_EXIT's.
 */
export async function runWithLease(argv: string[], options: RunOptions, command: Command): Promise<void> {
  const say = options.quiet ? () => {} : sayOnStderr;
  const stopWaiting = new AbortController();
  let running: CommandProcess | undefined;
  const restore = divertSignals((signal) => {
    if (!running) stopWaiting.abort(signal);
    // A terminal's Ctrl-C reaches the whole foreground process group, the command as well: once is enough.
    else if (signal !== 'SIGINT' || !process.stdin.isTTY) running.pass(signal);
  });

  const work = async (held: HeldLease, leaseSignal: AbortSignal): Promise<CommandExit> => {
    if (options.jsonEnv !== undefined) await writeFile(options.jsonEnv, leaseEnvironmentJson(held));
    const started = await CommandProcess.start(argv, { ...process.env, ...leaseEnvironment(held) });
    running = started;
    const stop = () => {
      const why = leaseSignal.reason instanceof Error ? leaseSignal.reason.message : `stopped (${String(leaseSignal.reason)})`;
      sayOnStderr(`${why}; stopping the command: SIGTERM, then SIGKILL after ${formatDuration(options.grace)}`);
      started.stop(options.grace);
    };
    if (leaseSignal.aborted) stop();
    else leaseSignal.addEventListener('abort', stop, { once: true });
    return started.exited;
  };
  const holding: HoldOptions<CommandExit> = {
    signal: stopWaiting.signal,
    onEvent: (event) => {
      const line = holdProgressLine(event);
      if (line !== undefined) (event.type === 'release_failed' ? sayOnStderr : say)(line);
    },
    releaseReason: (outcome) => ('value' in outcome ? describeExit(outcome.value) : `the command did not run: ${(outcome.error as Error).message}`),
  };

  let exit: CommandExit;
  try {
    exit = await hold(command, leaseRequestOf(options), work, holding);
  } catch (error) {
    const { exitCode, message } = error instanceof CommandNotStarted ? error : leaseRunFailure(error);
    sayOnStderr(message);
    throw new PassedOnExit(exitCode);
  } finally {
    restore();
  }
  const status = exitStatus(exit);
  if (status !== 0) throw new PassedOnExit(status);
}

/** Over the HTTP API when SLIPWAY_URL is set (the client's withLease), else on the database. */
async function hold<T>(command: Command, request: LeaseRequest, work: (held: HeldLease, signal: AbortSignal) => Promise<T>, options: HoldOptions<T>) {
  const config = loadConfig();
  if (config.SLIPWAY_URL === undefined) {
    const { LocalLeaseService } = await import('../transport/LocalLeaseService.ts');
    return withSession(command, (session) => holdLease(new LocalLeaseService(session, sayOnStderr), request, work, options));
  }
  const [{ SlipwayClient }, { leaseBody }] = await Promise.all([import('../../client/SlipwayClient.ts'), import('../transport/RemoteTransport.ts')]);
  // loadConfig refuses a SLIPWAY_URL without SLIPWAY_TOKEN.
  return new SlipwayClient({ baseUrl: config.SLIPWAY_URL, token: config.SLIPWAY_TOKEN! }).withLease(leaseBody(request), work, options);
}
