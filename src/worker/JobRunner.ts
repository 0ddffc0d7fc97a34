import { EventEmitter } from 'node:events';
import { run, type Runner, type RunnerOptions, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import type { PartHealth } from '../health/ProcessHealth.ts';
import { waitBeforeReconnect } from '../health/reconnectDelay.ts';
import type { Logger } from '../log.ts';

/**
 * graphile-worker's runner, kept running. The runner stops itself for good
 * when its pool meets a fatal connection error (a PostgreSQL restart or
 * failover does that), while the rest of the process carries on; so this
 * watches the runner's promise and, when it settles without our asking,
 * reports the part down and starts a new runner, with backoff, until one
 * starts. Drains, the collector's crontab and callback deliveries all run
 * here, so a worker whose runner is down does no work: its heartbeat stops
 * (WorkerRegistry asks `isUp`).
 *
 * The jobs a stopped runner had taken stay locked under its pool's id;
 * `lockerIds` names the pool of the runner running now, which the registry
 * publishes so that any sweeper can unlock jobs held by pools nobody runs
 * (see Sweeper).
 *
 * Each runner gets a connection pool of our own making, ended once that
 * runner is done: a pool graphile-worker makes and then lets go of loses its
 * 'error' listener, and an idle connection of it that the server then
 * terminates would crash the process.
 */
export class JobRunner {
  private current: { readonly runner: Runner; readonly pool: pg.Pool } | undefined;
  private poolId: string | undefined;
  private lastFatal: unknown;
  private readonly stopping = new AbortController();
  private restarting: Promise<void> | undefined;

  constructor(
    /** What run() takes, but the pool: its connection string and size make one per runner. */
    private readonly options: Omit<RunnerOptions, 'pgPool' | 'events'> & { connectionString: string; maxPoolSize: number },
    private readonly health: PartHealth,
    private readonly log: Logger,
    /** Told when the runner comes up or goes down (the registry beats at once). */
    private readonly onChange: () => void,
  ) {}

  /** Starts the first runner; fails if it cannot (the caller reports that at start-up). */
  async start(): Promise<void> {
    this.adopt(await this.startOne());
  }

  /** Whether a runner runs now: one is adopted exactly while the part is up. */
  get isUp(): boolean {
    return this.current !== undefined;
  }

  /** The graphile-worker pool ids whose locks on jobs are ours now (`locked_by`). */
  get lockerIds(): readonly string[] {
    return this.current !== undefined && this.poolId !== undefined ? [this.poolId] : [];
  }

  /** Finishes the jobs in progress, then stops; no restart after this. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.restarting;
    const current = this.current;
    this.current = undefined;
    await current?.runner.stop();
    await current?.pool.end();
  }

  private async startOne(): Promise<{ runner: Runner; pool: pg.Pool }> {
    const { connectionString, maxPoolSize, ...options } = this.options;
    const pool = new pg.Pool({ connectionString, max: maxPoolSize });
    // Idle and checked-out connections alike: a terminated one must not crash the process.
    const failed = (error: Error) => this.log.debug({ err: error }, 'graphile-worker connection failed');
    pool.on('error', failed);
    pool.on('connect', (client) => client.on('error', failed));
    // Our own emitter, given to run(): the pool is created (and announced)
    // before run() returns.
    const events = new EventEmitter() as WorkerEvents;
    // graphile-worker 0.17 locks jobs under the pool's id (not each worker's), local queue or not.
    events.on('pool:create', ({ workerPool }) => {
      this.poolId = workerPool.id;
    });
    events.on('pool:fatalError', ({ error }) => {
      this.lastFatal = error;
    });
    try {
      return { runner: await run({ ...options, pgPool: pool, events }), pool };
    } catch (error) {
      await pool.end();
      throw error;
    }
  }

  private adopt(current: { runner: Runner; pool: pg.Pool }): void {
    this.current = current;
    this.health.up();
    this.onChange();
    void current.runner.promise
      .catch((error: unknown) => {
        this.lastFatal ??= error;
      })
      .then(() => {
        if (this.stopping.signal.aborted || this.current !== current) return;
        this.current = undefined;
        void current.pool.end().catch(() => undefined);
        this.health.down(this.lastFatal ?? new Error('graphile-worker runner stopped by itself'));
        this.lastFatal = undefined;
        this.onChange();
        this.restarting = this.restart().finally(() => {
          this.restarting = undefined;
        });
      });
  }

  private async restart(): Promise<void> {
    for (let attempt = 0; await waitBeforeReconnect(attempt, this.stopping.signal); attempt++) {
      let started: { runner: Runner; pool: pg.Pool };
      try {
        started = await this.startOne();
      } catch (error) {
        this.health.down(error);
        this.log.debug({ err: error, attempt }, 'graphile-worker runner did not start; retrying');
        continue;
      }
      if (this.stopping.signal.aborted) {
        await started.runner.stop();
        await started.pool.end();
        return;
      }
      this.adopt(started);
      return;
    }
  }
}
