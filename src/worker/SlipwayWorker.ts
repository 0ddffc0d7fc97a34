import { setTimeout as sleep } from 'node:timers/promises';
import { callbackTasks } from '../tasks/deliverCallback.ts';
import { CallbackDelivery } from '../tasks/CallbackDelivery.ts';
import { gcCronItems, gcTasks } from '../tasks/gcTasks.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import { withSessionSettings } from '../db/sessionSettings.ts';
import { DrainEngine } from '../drain/DrainEngine.ts';
import { DriverRegistry } from '../drivers/registry.ts';
import { ProcessHealth } from '../health/ProcessHealth.ts';
import type { Logger } from '../log.ts';
import { slipwayVersion } from '../version.ts';
import { graphileLogger } from '../graphileLogger.ts';
import { JobRunner } from './JobRunner.ts';
import { Sweeper } from './Sweeper.ts';
import { Timekeeper } from './Timekeeper.ts';
import { WorkerRegistry } from './WorkerRegistry.ts';

/** graphile-worker's jobs a worker runs at once: callback deliveries and collector passes. */
const JOB_CONCURRENCY = 4;

/**
 * One worker process's share of the work: the drain engine, graphile-worker
 * running callback deliveries and the collector's schedule, the sweeper, the
 * timekeeper (deadlines and health checks on time), and the registry
 * heartbeat. All workers are equal; run as many as you like
 * against one database. Every part outlives a lost database: the runner is
 * restarted (JobRunner), the drain engine's LISTEN is made again and each
 * of its lanes takes a fresh connection, the registry, the sweeper and the
 * timekeeper retry on their next tick. `health` (shared with the API in `slipway start`)
 * tells /readyz whether the runner and the engine's LISTEN are up.
 */
export class SlipwayWorker {
  private constructor(
    private readonly runner: JobRunner,
    private readonly engine: DrainEngine,
    private readonly sweeper: Sweeper,
    private readonly timekeeper: Timekeeper,
    private readonly registry: WorkerRegistry,
    private readonly graceMs: number,
    private readonly log: Logger,
    readonly id: string,
  ) {}

  static async start(database: Database, config: Config, log: Logger, health = new ProcessHealth(log)): Promise<SlipwayWorker> {
    const drivers = new DriverRegistry({ query: (text, values) => database.pool.query(text, values) });
    const engine = new DrainEngine(database, drivers, log, {
      lanes: config.SLIPWAY_WORKER_CONCURRENCY,
      pollMs: config.SLIPWAY_DRAIN_POLL_MS,
      chaosDelayMs: config.SLIPWAY_CHAOS_DRAIN_DELAY_MS,
      handOffAfterMs: config.SLIPWAY_STALE_AFTER_MS,
    });
    let registry: WorkerRegistry | undefined;
    const runnerOptions = {
      // graphile-worker gets its own pool: ours parses int8 as numbers.
      connectionString: withSessionSettings(database.url, ASYNCHRONOUS_COMMITS),
      concurrency: JOB_CONCURRENCY,
      maxPoolSize: JOB_CONCURRENCY + 2,
      noHandleSignals: true,
      pollInterval: 2000,
      taskList: {
        ...callbackTasks(CallbackDelivery.fromConfig(database.db, config, log)),
        ...gcTasks(database, config, log),
      },
      parsedCronItems: gcCronItems(config),
      logger: graphileLogger(log),
    };
    const runner = new JobRunner(runnerOptions, health.part('jobs'), log, () => void registry?.beatNow());
    await runner.start();
    try {
      await engine.start(health.part('wakeups'));
    } catch (error) {
      await runner.stop();
      throw error;
    }
    registry = new WorkerRegistry(database.pool, log, config.SLIPWAY_HEARTBEAT_MS, runner);
    try {
      await registry.register();
    } catch (error) {
      await Promise.all([runner.stop(), engine.stop()]);
      throw error;
    }
    const sweeper = new Sweeper(database.db, log, config.SLIPWAY_SWEEP_INTERVAL_MS, config.SLIPWAY_STALE_AFTER_MS);
    sweeper.start();
    const timekeeper = new Timekeeper(database.db, log, config.SLIPWAY_DUE_POLL_MS, config.SLIPWAY_GC_BATCH_SIZE);
    timekeeper.start();
    log.info({ worker: registry.id, concurrency: config.SLIPWAY_WORKER_CONCURRENCY, version: slipwayVersion() }, 'worker started');
    return new SlipwayWorker(runner, engine, sweeper, timekeeper, registry, config.SLIPWAY_SHUTDOWN_GRACE_MS, log, registry.id);
  }

  /**
   * Stops taking jobs, lets the drains in flight finish the command each is
   * on (its driver call and the commit of its outcome) and leaves the
   * registry; true when that took less than the grace period. Past it, it
   * returns false with drains still running: the caller should exit at once
   * (closing the pool would wait for them), and other workers take their
   * objects over, as after a crash.
   */
  async stop(): Promise<boolean> {
    await Promise.all([this.sweeper.stop(), this.timekeeper.stop()]);
    // An unref'd timer: a clean stop does not wait for it to run out.
    const stopped = Promise.all([this.engine.stop(), this.runner.stop()]).then(() => true);
    const clean = await Promise.race([stopped, sleep(this.graceMs, false, { ref: false })]);
    if (!clean)
      this.log.warn(
        { worker: this.id, graceMs: this.graceMs },
        'shutdown grace period over with drains still in flight; their objects go to other workers',
      );
    await this.registry.deregister();
    return clean;
  }
}

/**
 * graphile-worker's own connections commit without waiting for the WAL
 * flush. They only take and complete jobs, and every Slipway job may run
 * twice: a callback delivery is at-least-once anyway (receivers dedupe on
 * its delivery id), and a collector pass only asks for what is still due.
 * So losing a completion (or a take) in a server crash costs a repeated
 * run, nothing more. This spares the flush that would otherwise be waited
 * for on every job taken and completed.
 */
const ASYNCHRONOUS_COMMITS = { synchronous_commit: 'off' };
