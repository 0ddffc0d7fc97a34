import { spawn } from 'node:child_process';
import path from 'node:path';
import { z } from 'zod';
import {
  type CheckResult,
  type Driver,
  type DriverCall,
  type DriverFactory,
  type DriverOperation,
  DRIVER_OPERATIONS,
  type DriverResult,
  type ListCall,
  type ListResult,
  PermanentDriverError,
  type SlotListResult,
  TransientDriverError,
} from './Driver.ts';
import { formatDuration } from '../domain/durations.ts';

/** EX_TEMPFAIL from sysexits.h: "temporary failure, the user is invited to retry". */
const EX_TEMPFAIL = 75;
/** How much of a program's stderr is kept for people to read (its end: where the error usually is). */
export const STDERR_KEPT_BYTES = 4096;
/**
 * How long the pipes may stay open after the program itself exited: a child
 * it left running (a daemon it started) can hold them forever.
 */
const PIPE_GRACE_MS = 1000;
/** A program printing more than this on stdout is not printing a driver result. */
const STDOUT_LIMIT_BYTES = 1024 * 1024;

/** A program and its arguments, run without a shell. */
export const Argv = z
  .array(z.string().min(1, 'argument must not be empty').max(4096))
  .min(1, 'give the program and its arguments, e.g. ["./workspace.sh", "create"]')
  .max(100);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ENV_NAME_RULE = 'expected an environment variable name (letters, digits and _, not starting with a digit)';
const EnvName = z.string().regex(ENV_NAME, ENV_NAME_RULE);

const Settings = z
  .object({
    /**
     * The program run for each operation, as an argv array: it is executed
     * directly, never through a shell, so nothing in an object's attributes
     * or holder can become a command. An operation without one succeeds
     * without running anything.
     */
    commands: z.partialRecord(z.enum(DRIVER_OPERATIONS), Argv).refine((c) => Object.keys(c).length > 0, 'give a command for at least one operation'),
    /** Working directory of every program (absolute); relative program paths are resolved in it. */
    cwd: z.string().refine(path.isAbsolute, 'cwd must be an absolute path').optional(),
    /** Variables set for every program. */
    env: z
      .record(z.string(), z.string().max(32_768))
      .refine((env) => Object.keys(env).every((name) => ENV_NAME.test(name)), ENV_NAME_RULE)
      .default({}),
    /** Variables passed through from the worker's own environment; nothing else is. */
    passEnv: z.array(EnvName).default(['PATH', 'HOME', 'LANG', 'TZ', 'TMPDIR']),
    /** A program still running after this long is stopped (SIGTERM to its process group, then SIGKILL). */
    timeoutMs: z
      .number()
      .int()
      .min(100)
      .max(24 * 3_600_000)
      .default(60_000),
    /** How long after SIGTERM the process group gets SIGKILL. */
    killGraceMs: z.number().int().min(0).max(600_000).default(5_000),
    /** Exit codes meaning "try again later"; any other non-zero exit is a permanent failure. */
    transientExitCodes: z.array(z.number().int().min(1).max(255)).default([EX_TEMPFAIL]),
    /** Free-form settings for the programs themselves (they get all settings on stdin). */
    params: z.record(z.string(), z.json()).default({}),
  })
  .strict();
type Settings = z.infer<typeof Settings>;

/** What a program's run came to, before it is read as a driver result. */
interface Finished {
  /** Why the program could not be started at all. */
  readonly startError?: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly stdout: string;
  readonly stdoutOverflow: boolean;
  readonly stderr: string;
}

/**
 * Runs configured programs for each lifecycle step: the step's call (the
 * operation, the object, the blueprint's settings and the idempotency key) as
 * one JSON document on stdin; the result ({"attributes": {...}}, or nothing)
 * as JSON on stdout. Exit 0 is success, an exit code listed in
 * transientExitCodes (default 75) or a timeout is "try again later", any other
 * exit or unreadable output is a permanent failure. The end of stderr goes
 * into the failure's message, which the drain records on the command.
 */
export const ExecDriver: DriverFactory<Settings> = {
  name: 'exec',
  description: 'each step runs a configured program: JSON call on stdin, JSON result on stdout',
  settingsSchema: Settings,
  create(settings) {
    const run =
      // The answer's type is the operation's: validatingDriver checks its shape.
        <R = DriverResult>(operation: DriverOperation) =>
        async (call: DriverCall | ListCall): Promise<R> => {
          const argv = settings.commands[operation];
          if (!argv) return {} as R;
          const finished = await runProgram(settings, argv, { operation, ...call });
          return readResult(settings, operation, argv, finished) as R;
        };
    return {
      allocateResource: run('allocateResource'),
      activateResource: run('activateResource'),
      destroyResource: run('destroyResource'),
      acquireLease: run('acquireLease'),
      activateLease: run('activateLease'),
      releaseLease: run('releaseLease'),
      ...(settings.commands.cleanSlot ? { cleanSlot: run('cleanSlot') } : {}),
      // Checked only where a probe program is configured: without one, the
      // blueprint's resources are trusted as made. Exit 0 with nothing on
      // stdout is healthy; {"health": "gone"} or "unhealthy" says otherwise
      // (an answer of its own shape, which validatingDriver checks).
      ...(settings.commands.checkResource ? { checkResource: run<CheckResult>('checkResource') } : {}),
      // Listed, and orphans destroyed, only where a program is configured:
      // {"resources": [...]}, or a resource's {"slots": [...]}, on stdout
      // (validatingDriver checks their shapes).
      ...(settings.commands.listResources ? { listResources: run<ListResult>('listResources') } : {}),
      ...(settings.commands.destroyOrphan ? { destroyOrphan: run('destroyOrphan') } : {}),
      ...(settings.commands.listSlots ? { listSlots: run<SlotListResult>('listSlots') } : {}),
    } satisfies Driver;
  },
};

/** A program's input: the call and its operation (a listing, asked outside any command, has no idempotency key). */
type ProgramInput = { operation: string; idempotencyKey?: string };

function environment(settings: Settings, input: ProgramInput): NodeJS.ProcessEnv {
  const passed = Object.fromEntries(settings.passEnv.filter((name) => process.env[name] !== undefined).map((name) => [name, process.env[name]]));
  // The two values a plain shell script most often needs, so it can act without parsing JSON.
  return {
    ...passed,
    ...settings.env,
    SLIPWAY_OPERATION: input.operation,
    ...(input.idempotencyKey === undefined ? {} : { SLIPWAY_IDEMPOTENCY_KEY: input.idempotencyKey }),
  };
}

/**
 * Runs one program to its end. It leads a process group of its own, so a
 * timeout stops whatever it started too (a shell script's children would
 * otherwise keep running, and keep its stdout open).
 */
function runProgram(settings: Settings, argv: readonly string[], input: ProgramInput): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd: settings.cwd,
      env: environment(settings, input),
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stdoutOverflow = false;
    let stderr = Buffer.alloc(0);
    let stderrBytes = 0;
    let timedOut = false;
    let spawnError: Error | undefined;

    const signalGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // The group is already gone.
      }
    };
    let killTimer: NodeJS.Timeout | undefined;
    let pipesTimer: NodeJS.Timeout | undefined;
    const timeoutTimer = setTimeout(() => {
      timedOut = true;
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => signalGroup('SIGKILL'), settings.killGraceMs);
    }, settings.timeoutMs);

    child.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > STDOUT_LIMIT_BYTES) stdoutOverflow = true;
      else stdout.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      // Keep only the tail: the end of a long log is what explains the failure.
      stderrBytes += chunk.length;
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > 2 * STDERR_KEPT_BYTES) stderr = stderr.subarray(stderr.length - STDERR_KEPT_BYTES);
    });
    // A program that exits without reading its input closes the pipe under us.
    child.stdin.on('error', () => undefined);
    child.on('error', (error) => {
      spawnError = error;
    });
    child.on('exit', () => {
      pipesTimer = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, PIPE_GRACE_MS);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timeoutTimer);
      clearTimeout(killTimer);
      clearTimeout(pipesTimer);
      if (spawnError) {
        resolve({ startError: spawnError.message, code: null, signal: null, timedOut: false, stdout: '', stdoutOverflow: false, stderr: '' });
        return;
      }
      resolve({
        code,
        signal,
        timedOut,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stdoutOverflow,
        stderr: tail(stderr, stderrBytes),
      });
    });
    child.stdin.end(JSON.stringify(input));
  });
}

/** The last STDERR_KEPT_BYTES of what was written (`total` bytes), marked when cut. */
function tail(bytes: Buffer, total: number): string {
  const text = bytes
    .subarray(Math.max(0, bytes.length - STDERR_KEPT_BYTES))
    .toString('utf8')
    .trim();
  return total > STDERR_KEPT_BYTES ? `…${text}` : text;
}

/** Turns a finished run into the driver's result, or the error that says what went wrong. */
function readResult(settings: Settings, operation: DriverOperation, argv: readonly string[], run: Finished): DriverResult {
  const program = `${operation}: ${argv[0]}`;
  const withStderr = (message: string) => (run.stderr ? `${message}; stderr: ${run.stderr}` : message);
  if (run.timedOut) {
    // The program may or may not have done its work: retrying with the same
    // idempotency key is the safe way to find out.
    throw new TransientDriverError(withStderr(`${program} timed out after ${formatDuration(settings.timeoutMs)} and was stopped`));
  }
  if (run.startError !== undefined) throw new PermanentDriverError(`${program} could not be started: ${run.startError}`);
  if (run.signal !== null) {
    // Killed by someone else (the OOM killer, an operator): worth another try.
    throw new TransientDriverError(withStderr(`${program} was killed by ${run.signal}`));
  }
  if (run.code !== 0) {
    const transient = settings.transientExitCodes.includes(run.code!);
    const message = withStderr(`${program} exited with code ${run.code} (${transient ? 'transient' : 'permanent'} failure)`);
    throw transient ? new TransientDriverError(message) : new PermanentDriverError(message);
  }
  if (run.stdoutOverflow) throw new PermanentDriverError(withStderr(`${program} printed more than ${STDOUT_LIMIT_BYTES} bytes on stdout`));
  // Nothing printed means nothing to add: handy for steps like "remove it".
  if (run.stdout.trim() === '') return {};
  try {
    // The shape is checked by validatingDriver, like every driver's output.
    return JSON.parse(run.stdout) as DriverResult;
  } catch {
    const shown = run.stdout.length > 200 ? `${run.stdout.slice(0, 200)}…` : run.stdout;
    throw new PermanentDriverError(withStderr(`${program} printed invalid JSON on stdout: ${JSON.stringify(shown)}`));
  }
}
