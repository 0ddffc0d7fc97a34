import type { Config } from '../config.ts';

/**
 * Connections a worker's pool needs: one per drain lane, as many again for
 * the driver calls and reads its steps make meanwhile, one for the lanes'
 * LISTEN, one for the sweeper, one for the timekeeper and one the registry keeps for its heartbeat
 * and liveness lock. (graphile-worker has a pool of its own.)
 */
export function workerPoolSize(config: Pick<Config, 'SLIPWAY_WORKER_CONCURRENCY'>): number {
  return 2 * config.SLIPWAY_WORKER_CONCURRENCY + 4;
}
