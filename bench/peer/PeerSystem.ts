import { performance } from 'node:perf_hooks';
import type { WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import type { LeaseSystem, Milestone, MilestoneWatch, PoolShape } from '../LeaseSystem.ts';
import { pollUntil } from '../measure.ts';
import type { WorkerFleet } from '../WorkerFleet.ts';
import { createPeerPool, PEER_CHANNEL, PEER_SCHEMA, PEER_WORKER_SCHEMA } from './peerSchema.ts';
import type { PeerProfile } from './peerProfiles.ts';
import type { FromPeerWorker, ToPeerWorker } from './peerProtocol.ts';

export type PeerFleet = WorkerFleet<ToPeerWorker, FromPeerWorker>;

/** Slots per resource of a warm pool, as Slipway's. */
const WARM_SLOTS_PER_RESOURCE = 100;
/** A job that failed this often is a fault of the peer, not a race it retries away: the run stops. */
const FAULTY_ATTEMPTS = 3;
const ANNOUNCEMENT_TIMEOUT_MS = 5 * 60_000;

/**
 * The peer as the benchmark drives it: leases made and released by
 * appending jobs (bench/peer/peerSchema.ts), run by the peer worker
 * processes of `fleet`.
 */
export class PeerSystem implements LeaseSystem {
  readonly name: string;

  constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    readonly fleet: PeerFleet,
    private readonly utils: WorkerUtils,
    profile: PeerProfile,
  ) {
    this.name = `peer (${profile})`;
  }

  createPool(name: string, shape: PoolShape): Promise<number> {
    return createPeerPool(this.pool, name, shape.resources, shape.slotsPerResource);
  }

  /** The peer's resources exist from the start, so any pool is warm. */
  warmPool(name: string, room: number): Promise<number> {
    return this.createPool(name, { resources: Math.ceil(room / WARM_SLOTS_PER_RESOURCE), slotsPerResource: WARM_SLOTS_PER_RESOURCE });
  }

  async createLease(poolId: number): Promise<number> {
    const { rows } = await this.pool.query<{ id: number }>(
      `with l as (insert into ${PEER_SCHEMA}.leases (pool_id) values ($1) returning id)
       select id, ${PEER_SCHEMA}.append('lease', id, 'allocate') from l`,
      [poolId],
    );
    return rows[0]!.id;
  }

  async release(leaseId: number): Promise<void> {
    await this.pool.query(`select ${PEER_SCHEMA}.append('lease', $1, 'release')`, [leaseId]);
  }

  async activeLeases(poolId: number): Promise<number[]> {
    const { rows } = await this.pool.query<{ id: number }>(`select id from ${PEER_SCHEMA}.leases where pool_id = $1 and state = 'active'`, [poolId]);
    return rows.map((row) => row.id);
  }

  async countIn(poolId: number, state: Milestone): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(`select count(*)::int as n from ${PEER_SCHEMA}.leases where pool_id = $1 and state = $2`, [
      poolId,
      state,
    ]);
    return rows[0]!.n;
  }

  /** No job left (graphile-worker deletes a job once it has run); fails on a job that keeps failing. */
  async quiet(): Promise<boolean> {
    const { rows } = await this.pool.query<{ attempts: number; last_error: string | null; task_identifier: string }>(
      `select attempts, last_error, task_identifier from ${PEER_WORKER_SCHEMA}.jobs order by attempts desc limit 1`,
    );
    const job = rows[0];
    if (job && job.attempts >= FAULTY_ATTEMPTS && job.last_error) {
      throw new Error(`a ${job.task_identifier} job of the peer failed ${job.attempts} times: ${job.last_error}`);
    }
    return job === undefined;
  }

  /**
   * graphile-worker keeps a row per named queue ever used, and each fetch of
   * jobs locks every one that is not busy, so a queue per object costs more
   * the more objects have had jobs; its docs ask for periodic cleanup of
   * unused queues (GC_JOB_QUEUES). Only on a quiet system: run while jobs
   * are being added, it can delete a queue a new job was just put in, and
   * that job is never run (seen while building this benchmark).
   */
  maintain(): Promise<void> {
    return this.utils.cleanup({ tasks: ['GC_JOB_QUEUES'] });
  }

  watch(): Promise<MilestoneWatch> {
    return PeerWatch.open(this.databaseUrl);
  }

  whileRunning<T>(work: Promise<T>): Promise<T> {
    return this.fleet.whileRunning(work);
  }
}

/** Milestones as the peer's jobs announce them, in the transaction that reaches them. */
class PeerWatch implements MilestoneWatch {
  private readonly reached = new Map<string, number>();

  private constructor(private readonly client: pg.Client) {
    client.on('notification', ({ payload }) => {
      if (payload && !this.reached.has(payload)) this.reached.set(payload, performance.now());
    });
  }

  static async open(databaseUrl: string): Promise<PeerWatch> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const watch = new PeerWatch(client);
    await client.query(`listen ${PEER_CHANNEL}`);
    return watch;
  }

  async reachedAt(leaseIds: readonly number[], milestone: Milestone): Promise<number[]> {
    const keys = leaseIds.map((id) => `${milestone}:${id}`);
    const allAnnounced = async () => keys.every((key) => this.reached.has(key));
    await pollUntil(`${leaseIds.length} peer leases to be announced ${milestone}`, allAnnounced, ANNOUNCEMENT_TIMEOUT_MS, 100);
    return keys.map((key) => this.reached.get(key)!);
  }

  close(): Promise<void> {
    return this.client.end();
  }
}
