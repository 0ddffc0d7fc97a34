import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { FromWorker, Message } from './workerProtocol.ts';

/** Slipway's worker process; the peer's is bench/peer/peerWorkerProcess.ts. */
const SLIPWAY_WORKER_MODULE = fileURLToPath(new URL('./workerProcess.ts', import.meta.url));

type Reply<From extends Message, T extends string> = Extract<From, { type: T }>;

/**
 * Worker processes, the way workers scale out in production. Separate
 * processes (rather than workers inside the benchmark's own process) let the
 * work use both cores for JavaScript while PostgreSQL takes its share, and
 * make the RSS figure the workers' own.
 *
 * Every worker module speaks workerProtocol.ts; one may answer more messages
 * (`Ask`, answered by `Answer`), which askAll sends.
 */
export class WorkerFleet<Ask extends Message = never, Answer extends Message = never> {
  private readonly crashed: Promise<never>;
  private stopping = false;

  private constructor(private readonly children: readonly ChildProcess[]) {
    this.crashed = new Promise<never>((_, reject) => {
      for (const child of children) {
        child.once('exit', (code, signal) => {
          if (!this.stopping) reject(new Error(`benchmark worker ${child.pid} exited unexpectedly (${signal ?? code})`));
        });
      }
    });
    // Reported by the next whileRunning(); nobody may be waiting at the moment a worker dies.
    this.crashed.catch(() => undefined);
  }

  /**
   * Forks `count` workers of `module` (Slipway's by default) on the database,
   * with `env` added to this process's, and waits until each has loaded and
   * connected. `cpuProfileDir`: each worker writes a V8 CPU profile there when it exits.
   */
  static async launch<Ask extends Message = never, Answer extends Message = never>(
    count: number,
    databaseUrl: string,
    { module = SLIPWAY_WORKER_MODULE, env = {}, cpuProfileDir }: { module?: string; env?: Record<string, string>; cpuProfileDir?: string } = {},
  ): Promise<WorkerFleet<Ask, Answer>> {
    const childEnv = { ...process.env, ...env, DATABASE_URL: databaseUrl, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
    const execArgv = ['--import', 'tsx', ...(cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [])];
    const children = Array.from({ length: count }, () => fork(module, [], { execArgv, env: childEnv }));
    const fleet = new WorkerFleet<Ask, Answer>(children);
    try {
      await Promise.all(children.map((child) => nextReply<FromWorker, 'ready'>(child, 'ready')));
    } catch (error) {
      fleet.kill();
      throw error;
    }
    return fleet;
  }

  /** The workers' process ids. */
  get pids(): number[] {
    return this.children.map((child) => child.pid!);
  }

  /** Starts every worker; returns each one's concurrency. */
  async start(): Promise<number[]> {
    const replies = await this.askEvery<FromWorker, 'started'>({ type: 'start' }, 'started');
    return replies.map((r) => r.concurrency);
  }

  /** Waits for `work`, or fails as soon as a worker dies, instead of waiting out the timeout. */
  whileRunning<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.crashed]);
  }

  /** Each worker's peak resident set size since it started or since the last call, in bytes. */
  async takePeakRss(): Promise<number[]> {
    const replies = await this.askEvery<FromWorker, 'peakRss'>({ type: 'takePeakRss' }, 'peakRss');
    return replies.map((r) => r.bytes);
  }

  /** Sends a message of the module's own to every worker and returns their replies of type `reply`. */
  askAll<T extends Answer['type']>(message: Ask, reply: T): Promise<Reply<Answer, T>[]> {
    return this.askEvery<Answer, T>(message, reply);
  }

  private askEvery<From extends Message, T extends string>(message: Message, reply: T): Promise<Reply<From, T>[]> {
    return Promise.all(this.children.map((child) => ask<From, T>(child, message, reply)));
  }

  /** Lets every worker finish its work in hand and exit. */
  async stop(): Promise<void> {
    this.stopping = true;
    const running = this.children.filter((child) => child.exitCode === null && child.signalCode === null);
    await Promise.all(
      running.map(async (child) => {
        const exited = once(child, 'exit');
        await ask<FromWorker, 'stopped'>(child, { type: 'stop' }, 'stopped');
        await exited;
      }),
    );
  }

  /** Ends the workers at once: for a run that failed. */
  kill(): void {
    this.stopping = true;
    for (const child of this.children) if (child.exitCode === null) child.kill();
  }
}

function ask<From extends Message, T extends string>(child: ChildProcess, message: Message, reply: T): Promise<Reply<From, T>> {
  const answer = nextReply<From, T>(child, reply);
  child.send(message);
  return answer;
}

function nextReply<From extends Message, T extends string>(child: ChildProcess, type: T): Promise<Reply<From, T>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: From) => {
      if (message.type !== type) return;
      settle();
      resolve(message as Reply<From, T>);
    };
    const onExit = (code: number | null, signal: string | null) => {
      settle();
      reject(new Error(`benchmark worker ${child.pid} exited (${signal ?? code}) before answering '${type}'`));
    };
    const settle = () => {
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}
