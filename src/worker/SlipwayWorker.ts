import { setTimeout as sleep } from 'node:timers/promises';
import { callbackTasks } from '../../workers/deliverCallback.ts';
import { drainTasks } from '../../workers/drainTasks.ts';
import { CallbackDelivery } from '../callbacks/CallbackDelivery.ts';
import { gcCronItems, gcTasks } from '../../workers/gcTasks.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/Database.ts';
import { BATCH_CONNECTIONS, DrainBatcher } from '../drain/DrainBatcher.ts';
import { ObjectDrain } from '../drain/ObjectDrain.ts';
import { DriverRegistry } from '../drivers/registry.ts';
import { ProcessHealth } from '../health/ProcessHealth.ts';
import type { Logger } from '../log.ts';
import { slipwayVersion } from '../version.ts';
import { graphileLogger } from './graphileLogger.ts';
import { JobRunner } from './JobRunner.ts';
import { Sweeper } from './Sweeper.ts';
import { WorkerRegistry } from './WorkerRegistry.ts';

/**
 * Connections a worker's pool needs: each object drained on its own holds
 * one for its whole drain and a driver call made from it borrows a second;
 * the batches hold one each (see DrainBatcher); one for the sweeper and one
 * the registry keeps for its heartbeat and liveness lock. (graphile-worker
 * has a pool of its own.)
 */
export function workerPoolSize(config: Pick<Config, 'SLIPWAY_WORKER_CONCURRENCY'>): number {
  return 2 * config.SLIPWAY_WORKER_CONCURRENCY + BATCH_CONNECTIONS + 2;
}

/**
 * Jobs a worker runs at once. Most drain jobs wait for a batch's next step
 * (several objects per round trip) and hold no connection; the more wait
 * together, the larger the batches. Drains on their own are still limited
 * to SLIPWAY_WORKER_CONCURRENCY at once. Four times it measured about
 * twice the drain rate of one times it with the benchmark's backlog.
 */
export function workerJobConcurrency(config: Pick<Config, 'SLIPWAY_WORKER_CONCURRENCY'>): number {
  return 4 * config.SLIPWAY_WORKER_CONCURRENCY;
}

/**
 * One worker process's share of the work: graphile-worker running the drain
 * tasks, the sweeper, and the registry heartbeat. All workers are equal;
 * run as many as you like against one database. Every part outlives a lost
 * database: the runner is restarted (JobRunner), the registry and the
 * sweeper retry on their next tick, and each drain takes a fresh connection.
 * `health` (shared with the API in `slipway start`) tells /readyz whether
 * the runner is up.
 */
export class SlipwayWorker {
  private constructor(
    private readonly runner: JobRunner,
    private readonly sweeper: Sweeper,
    private readonly registry: WorkerRegistry,
    private readonly drainsStopping: AbortController,
    private readonly graceMs: number,
    private readonly log: Logger,
    readonly id: string,
  ) {}

  static async start(database: Database, config: Config, log: Logger, health = new ProcessHealth(log)): Promise<SlipwayWorker> {
    const drivers = new DriverRegistry({ query: (text, values) => database.pool.query(text, values) });
    const drainsStopping = new AbortController();
    const perObject = new ObjectDrain(database.pool, drivers, log, {
      chaosDelayMs: config.SLIPWAY_CHAOS_DRAIN_DELAY_MS,
      handOffAfterMs: config.SLIPWAY_STALE_AFTER_MS,
      stopping: drainsStopping.signal,
    });
    const drain = new DrainBatcher(database.pool, perObject, log, {
      chaosDelayMs: config.SLIPWAY_CHAOS_DRAIN_DELAY_MS,
      aloneAtOnce: config.SLIPWAY_WORKER_CONCURRENCY,
    });
    const jobs = workerJobConcurrency(config);
    let registry: WorkerRegistry | undefined;
    const runnerOptions = {
      // graphile-worker gets its own pool: ours parses int8 as numbers.
      connectionString: asynchronousCommits(database.url),
      concurrency: jobs,
      maxPoolSize: config.SLIPWAY_WORKER_CONCURRENCY + 2,
      noHandleSignals: true,
      pollInterval: 2000,
      preset: {
        worker: {
          // Jobs are fetched and completed in batches rather than one round
          // trip each: a drain job is short, so graphile-worker's own queries
          // would otherwise cost as much as the drain. Jobs waiting in a
          // worker's local queue are locked; if that worker dies, the sweeper
          // re-wakes their objects (it ignores jobs that are not available).
          localQueue: { size: jobs + 1 },
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
        },
      },
      taskList: {
        ...drainTasks(drain),
        ...callbackTasks(CallbackDelivery.fromConfig(database.db, config, log)),
        ...gcTasks(database, config, log),
      },
      parsedCronItems: gcCronItems(config),
      logger: graphileLogger(log),
    };
    const runner = new JobRunner(runnerOptions, health.part('jobs'), log, () => void registry?.beatNow());
    await runner.start();
    registry = new WorkerRegistry(database.pool, log, config.SLIPWAY_HEARTBEAT_MS, runner);
    try {
      await registry.register();
    } catch (error) {
      await runner.stop();
      throw error;
    }
    const sweeper = new Sweeper(database.db, log, config.SLIPWAY_SWEEP_INTERVAL_MS, config.SLIPWAY_STALE_AFTER_MS);
    sweeper.start();
    log.info({ worker: registry.id, concurrency: config.SLIPWAY_WORKER_CONCURRENCY, version: slipwayVersion() }, 'worker started');
    return new SlipwayWorker(runner, sweeper, registry, drainsStopping, config.SLIPWAY_SHUTDOWN_GRACE_MS, log, registry.id);
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
    await this.sweeper.stop();
    this.drainsStopping.abort();
    // An unref'd timer: a clean stop does not wait for it to run out.
    const clean = await Promise.race([this.runner.stop().then(() => true), sleep(this.graceMs, false, { ref: false })]);
    if (!clean) this.log.warn({ worker: this.id, graceMs: this.graceMs }, 'shutdown grace period over with drains still in flight; their objects go to other workers');
    await this.registry.deregister();
    return clean;
  }
}

/**
 * graphile-worker's own connections commit without waiting for the WAL
 * flush. They only take and complete jobs, and every Slipway job may run
 * twice: a drain job is a wake-up (a second run finds nothing new), a
 * callback delivery is at-least-once anyway (receivers dedupe on its
 * delivery id), and a collector pass only asks for what is still due. So
 * losing a completion (or a take) in a server crash costs a repeated run,
 * nothing more. The jobs themselves are added in Slipway's durable
 * transactions, with the commands that need them. This spares the flush
 * that would otherwise be waited for on every job taken and completed.
 */
function asynchronousCommits(url: string): string {
  const withOption = new URL(url);
  withOption.searchParams.set('options', '-c synchronous_commit=off');
  return withOption.toString();
}
