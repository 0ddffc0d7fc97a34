import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const SCRIPT = path.resolve(import.meta.dirname, '../../helpers/workerProcess.ts');

/** Settings every test worker gets: fast recovery, quiet logs. Tests add to them. */
const TEST_WORKER_ENV = {
  LOG_LEVEL: 'warn',
  SLIPWAY_SWEEP_INTERVAL_MS: '500',
  SLIPWAY_STALE_AFTER_MS: '1500',
  SLIPWAY_WORKER_CONCURRENCY: '3',
} as const;

export interface WorkerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Everything the worker wrote to stderr and stdout (warnings and errors at LOG_LEVEL=warn). */
  readonly output: string[];
}

/**
 * Slipway workers as real child processes against one database. Each one's
 * connections carry `application_name=<name>`, so a test can find in
 * pg_stat_activity which worker holds a lock. `stopAll` (call it in afterAll)
 * SIGKILLs whatever does not stop on SIGTERM; an exiting test process takes
 * its workers with it.
 */
export class WorkerProcesses {
  private readonly workers: WorkerProcess[] = [];
  private readonly killOnExit = () => {
    for (const w of this.workers) w.child.kill('SIGKILL');
  };

  constructor(
    private readonly databaseUrl: string,
    private readonly env: Record<string, string> = {},
    /** Another build's worker script (an older release's tree), run from that tree. */
    private readonly script: string = SCRIPT,
  ) {
    process.once('exit', this.killOnExit);
  }

  /** Starts `count` workers and waits until each has registered. */
  async start(count: number, env: Record<string, string> = {}): Promise<WorkerProcess[]> {
    const first = this.workers.length;
    const names = Array.from({ length: count }, (_, i) => `slipway-worker-${first + i}`);
    return Promise.all(names.map((name) => this.startOne(name, env)));
  }

  private async startOne(name: string, env: Record<string, string>): Promise<WorkerProcess> {
    const url = new URL(this.databaseUrl);
    url.searchParams.set('application_name', name);
    const child = spawn(process.execPath, ['--import', 'tsx', this.script], {
      cwd: path.resolve(path.dirname(this.script), '../..'),
      env: { ...process.env, ...TEST_WORKER_ENV, ...this.env, ...env, DATABASE_URL: url.toString() },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const worker: WorkerProcess = { name, child, output: [] };
    this.workers.push(worker);
    child.stdout!.on('data', (chunk: Buffer) => worker.output.push(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => worker.output.push(chunk.toString()));
    const ready = once(child, 'message');
    const exited = once(child, 'exit').then(([code, signal]) => {
      throw new Error(`${name} exited (${code ?? signal}) before it was ready:\n${worker.output.join('')}`);
    });
    await Promise.race([ready, exited]);
    exited.catch(() => undefined);
    return worker;
  }

  /** The worker whose database connections are named `applicationName`. */
  byName(applicationName: string): WorkerProcess {
    const worker = this.workers.find((w) => w.name === applicationName);
    if (!worker) throw new Error(`no worker named ${applicationName}`);
    return worker;
  }

  /** The workers not (yet) known to have exited. */
  running(): WorkerProcess[] {
    return this.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
  }

  /** Sends `signal` and waits up to `timeoutMs` for the exit; true if it exited. */
  async kill(worker: WorkerProcess, signal: NodeJS.Signals, timeoutMs = 30_000): Promise<boolean> {
    const { child } = worker;
    if (!this.running().includes(worker)) return true;
    const timeout = new AbortController();
    const exited = once(child, 'exit', { signal: timeout.signal }).then(() => true);
    child.kill(signal);
    const timedOut = sleep(timeoutMs, false, { signal: timeout.signal });
    try {
      return await Promise.race([exited, timedOut]);
    } finally {
      timeout.abort();
      await Promise.allSettled([exited, timedOut]);
    }
  }

  /** SIGTERM to all, SIGKILL to any still running after `graceMs`. */
  async stopAll(graceMs = 10_000): Promise<void> {
    await Promise.all(
      this.workers.map(async (worker) => {
        if (!(await this.kill(worker, 'SIGTERM', graceMs))) await this.kill(worker, 'SIGKILL');
      }),
    );
    process.off('exit', this.killOnExit);
  }

  /** The last of what each exited worker wrote: why it died. */
  exitedOutput(): string {
    return this.lastOutput(this.workers.filter((w) => !this.running().includes(w)));
  }

  /** The last of what every worker, running or not, wrote (for a test that explains a stall). */
  lastOutput(workers: readonly WorkerProcess[] = this.workers): string {
    return workers
      .map(
        (w) =>
          `${w.name} ${this.running().includes(w) ? 'running' : `exited (${w.child.exitCode ?? w.child.signalCode})`}:\n${w.output.join('').slice(-4000)}`,
      )
      .join('\n');
  }

  /** Log lines at error level or above from any worker (pino level >= 50). */
  errors(): string[] {
    return this.workers.flatMap((w) =>
      w.output
        .join('')
        .split('\n')
        .filter((line) => /"level":(5|6)\d/.test(line))
        .map((line) => `${w.name}: ${line}`),
    );
  }
}
