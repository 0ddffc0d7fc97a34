import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { FromWorker, ToWorker } from './workerProtocol.ts';

const WORKER_MODULE = fileURLToPath(new URL('./workerProcess.ts', import.meta.url));

type Reply<T extends FromWorker['type']> = Extract<FromWorker, { type: T }>;

/**
 * Slipway workers as separate processes, the way they scale out in
 * production. Separate processes (rather than workers inside the benchmark's
 * own process) let the drain use both cores for JavaScript while PostgreSQL
 * takes its share, and make the RSS figure the workers' own.
 */
export class WorkerFleet {
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

  /** Forks `count` workers on the database and waits until each has loaded and connected. */
  static async launch(count: number, databaseUrl: string): Promise<WorkerFleet> {
    const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
    const children = Array.from({ length: count }, () => fork(WORKER_MODULE, [], { execArgv: ['--import', 'tsx'], env }));
    const fleet = new WorkerFleet(children);
    try {
      await Promise.all(children.map((child) => nextReply(child, 'ready')));
    } catch (error) {
      fleet.kill();
      throw error;
    }
    return fleet;
  }

  /** Starts every worker; returns each one's drain concurrency. */
  async start(): Promise<number[]> {
    const replies = await this.askAll({ type: 'start' }, 'started');
    return replies.map((r) => r.concurrency);
  }

  /** Waits for `work`, or fails as soon as a worker dies, instead of waiting out the timeout. */
  whileRunning<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.crashed]);
  }

  /** Each worker's peak resident set size since it started or since the last call, in bytes. */
  async takePeakRss(): Promise<number[]> {
    const replies = await this.askAll({ type: 'takePeakRss' }, 'peakRss');
    return replies.map((r) => r.bytes);
  }

  /** Lets every worker finish its drains and exit. */
  async stop(): Promise<void> {
    this.stopping = true;
    const running = this.children.filter((child) => child.exitCode === null && child.signalCode === null);
    await Promise.all(running.map(async (child) => {
      const exited = once(child, 'exit');
      await ask(child, { type: 'stop' }, 'stopped');
      await exited;
    }));
  }

  /** Ends the workers at once: for a run that failed. */
  kill(): void {
    this.stopping = true;
    for (const child of this.children) if (child.exitCode === null) child.kill();
  }

  private askAll<T extends FromWorker['type']>(message: ToWorker, reply: T): Promise<Reply<T>[]> {
    return Promise.all(this.children.map((child) => ask(child, message, reply)));
  }
}

function ask<T extends FromWorker['type']>(child: ChildProcess, message: ToWorker, reply: T): Promise<Reply<T>> {
  const answer = nextReply(child, reply);
  child.send(message);
  return answer;
}

function nextReply<T extends FromWorker['type']>(child: ChildProcess, type: T): Promise<Reply<T>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: FromWorker) => {
      if (message.type !== type) return;
      settle();
      resolve(message as Reply<T>);
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
