import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { Database } from '../src/db/Database.ts';
import { createLease } from '../src/objects/createLease.ts';
import { appendCommand } from '../src/queue/appendCommand.ts';
import { NoticeListener } from '../src/read/CommandNotices.ts';
import { allQueuesEmpty } from './commandCounts.ts';
import { BENCH_ACTOR, createSimulatedBlueprint } from './fixtures.ts';
import type { LeaseSystem, Milestone, MilestoneWatch, PoolShape } from './LeaseSystem.ts';
import { pollUntil } from './measure.ts';

/** Slots per resource of a warm pool. */
const WARM_SLOTS_PER_RESOURCE = 100;
/** How long announcements may lag behind the state the database shows. */
const ANNOUNCEMENT_TIMEOUT_MS = 5 * 60_000;
const SETUP_TIMEOUT_MS = 10 * 60_000;

/** What runs Slipway's workers: the benchmark's worker processes (WorkerFleet), or `slipway start` (ServiceProcess). */
export interface SlipwayWorkers {
  /** Waits for `work`, or fails as soon as a process running a worker dies. */
  whileRunning<T>(work: Promise<T>): Promise<T>;
}

/**
 * Slipway as the benchmark drives it: blueprints on the simulated driver,
 * leases made with createLease and released with appendCommand, the same
 * calls the API and the CLI make, drained by `workers` (none: nothing is
 * drained, so leases stay pending).
 */
export class SlipwaySystem implements LeaseSystem {
  readonly name = 'Slipway';

  constructor(
    private readonly database: Database,
    private readonly workers?: SlipwayWorkers,
  ) {}

  createPool(name: string, shape: PoolShape): Promise<number> {
    return createSimulatedBlueprint(this.database.db, name, { maxResources: shape.resources, leasesPerResource: shape.slotsPerResource });
  }

  /**
   * A blueprint whose warm minimum is all its resources, topped up (the
   * `top_up` an operator or the collector would send) until every one is
   * active: leases created after find free slots and go straight to a resource.
   */
  async warmPool(name: string, room: number): Promise<number> {
    const resources = Math.ceil(room / WARM_SLOTS_PER_RESOURCE);
    const poolId = await createSimulatedBlueprint(this.database.db, name, {
      maxResources: resources,
      minResources: resources,
      leasesPerResource: WARM_SLOTS_PER_RESOURCE,
    });
    await appendCommand(this.database.db, { target: { kind: 'blueprint', id: poolId }, kind: 'top_up', actor: BENCH_ACTOR });
    const allActive = async () => (await this.activeResources(poolId)) === resources && (await this.quiet());
    await this.whileRunning(pollUntil(`${resources} resources of ${name} to be active`, allActive, SETUP_TIMEOUT_MS, 100));
    return poolId;
  }

  async createLease(poolId: number): Promise<number> {
    const { lease } = await createLease(this.database.db, { blueprint: poolId, holder: 'bench' }, BENCH_ACTOR);
    return lease.id;
  }

  async release(leaseId: number): Promise<void> {
    await appendCommand(this.database.db, { target: { kind: 'lease', id: leaseId }, kind: 'release', actor: BENCH_ACTOR });
  }

  async activeLeases(poolId: number): Promise<number[]> {
    const rows = await this.database.db.selectFrom('leases').select('id').where('blueprint_id', '=', poolId).where('state', '=', 'active').execute();
    return rows.map((row) => row.id);
  }

  async countIn(poolId: number, state: Milestone): Promise<number> {
    const { n } = await this.database.db
      .selectFrom('leases')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', poolId)
      .where('state', '=', state)
      .executeTakeFirstOrThrow();
    return n;
  }

  quiet(): Promise<boolean> {
    return allQueuesEmpty(this.database.db);
  }

  private async activeResources(poolId: number): Promise<number> {
    const { n } = await this.database.db
      .selectFrom('resources')
      .select(sql<number>`count(*)::int`.as('n'))
      .where('blueprint_id', '=', poolId)
      .where('state', '=', 'active')
      .executeTakeFirstOrThrow();
    return n;
  }

  /** Nothing to do here: Slipway's housekeeping (the collector) runs inside its workers, as deployed. */
  async maintain(): Promise<void> {}

  watch(): Promise<MilestoneWatch> {
    return SlipwayWatch.open(this.database);
  }

  whileRunning<T>(work: Promise<T>): Promise<T> {
    return this.workers ? this.workers.whileRunning(work) : work;
  }
}

/**
 * Milestones as a client learns them: from the drain's announcements that a
 * command settled (the ones `?wait` and the CLI wait on), matched afterwards
 * to the command whose outcome took the lease to the milestone's state (its
 * state event names it: `activate` for active; for destroyed, the release).
 */
class SlipwayWatch implements MilestoneWatch {
  private readonly settledAt = new Map<number, number>();
  private readonly stopWatching: () => void;
  /** The LISTEN connection dropped and was made again: announcements may have been missed. */
  private resynced = false;

  private constructor(
    private readonly database: Database,
    private readonly listener: NoticeListener,
  ) {
    this.stopWatching = listener.watch(
      (notice) => {
        // 'queued' announces a yield (the command will run again later), not an end.
        if (notice.status !== 'queued' && !this.settledAt.has(notice.id)) this.settledAt.set(notice.id, performance.now());
      },
      () => {
        this.resynced = true;
      },
    );
  }

  static async open(database: Database): Promise<SlipwayWatch> {
    return new SlipwayWatch(database, await NoticeListener.open(database.pool));
  }

  async reachedAt(leaseIds: readonly number[], milestone: Milestone): Promise<number[]> {
    let commandOf = new Map<number, number>();
    const allAnnounced = async () => {
      if (this.resynced) throw new Error('the announcements connection dropped during the run: milestones may be missing');
      const rows = await this.database.db
        .selectFrom('events')
        .select(['target_id', 'command_id as id'])
        .where('target_kind', '=', 'lease')
        .where('type', '=', 'state')
        .where('to_state', '=', milestone)
        .where(sql<boolean>`target_id = any(${[...leaseIds]}::bigint[])`)
        .where('command_id', 'is not', null)
        .$narrowType<{ id: number }>()
        .execute();
      commandOf = new Map(rows.map((row) => [row.target_id, row.id]));
      return commandOf.size === leaseIds.length && rows.every((row) => this.settledAt.has(row.id));
    };
    await pollUntil(`${leaseIds.length} Slipway leases to be announced ${milestone}`, allAnnounced, ANNOUNCEMENT_TIMEOUT_MS, 100);
    return leaseIds.map((id) => this.settledAt.get(commandOf.get(id)!)!);
  }

  async close(): Promise<void> {
    this.stopWatching();
    await this.listener.close();
  }
}
