import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { PassedSignal } from '../shutdown.ts';
import { LEASE_RUN_EXIT, signalStatus } from './leaseRunExit.ts';

/** How a command ended: its status, or the signal that killed it. */
export interface CommandExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** The command could not be started: its status is a shell's (127 not found, 126 not runnable). */
export class CommandNotStarted extends Error {
  override name = 'CommandNotStarted';
  readonly exitCode: number;

  constructor(command: string, cause: NodeJS.ErrnoException) {
    const found = cause.code !== 'ENOENT';
    super(`cannot run ${command}: ${found ? cause.message : 'command not found'}`, { cause });
    this.exitCode = found ? LEASE_RUN_EXIT.cannotRun : LEASE_RUN_EXIT.notFound;
  }
}

/**
 * The command `lease run` runs: in the foreground of the same terminal,
 * with its stdin, stdout and stderr, so that it reads and writes as it would
 * without Slipway.
 */
export class CommandProcess {
  private killTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly child: ChildProcess,
    /** Settles once the command has exited. */
    readonly exited: Promise<CommandExit>,
  ) {}

  static async start(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<CommandProcess> {
    const [file, ...args] = argv as [string, ...string[]];
    const child = spawn(file, args, { stdio: 'inherit', env });
    const exited = new Promise<CommandExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    try {
      await once(child, 'spawn');
    } catch (error) {
      throw new CommandNotStarted(file, error as NodeJS.ErrnoException);
    }
    const started = new CommandProcess(child, exited);
    void exited.then(() => clearTimeout(started.killTimer));
    return started;
  }

  /** Passes a signal the CLI got on to the command. */
  pass(signal: PassedSignal): void {
    this.child.kill(signal);
  }

  /** SIGTERM now, then SIGKILL if it has not exited `graceMs` later. */
  stop(graceMs: number): void {
    this.child.kill('SIGTERM');
    this.killTimer ??= setTimeout(() => this.child.kill('SIGKILL'), graceMs);
  }
}

/** The status a shell would report for it: its own, or 128 + the signal that killed it. */
export function exitStatus(exit: CommandExit): number {
  return exit.code ?? signalStatus(exit.signal);
}

export function describeExit(exit: CommandExit): string {
  return exit.code !== null ? `the command exited with status ${exit.code}` : `the command was killed by ${exit.signal}`;
}
