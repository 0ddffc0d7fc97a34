/**
 * What the benchmark asks of a system that leases pooled slots, so that one
 * measurement (bench/lifecycle.ts, activeReleases.ts, latency.ts,
 * activation.ts) runs unchanged on Slipway (bench/SlipwaySystem.ts) and on
 * its peer built on graphile-worker alone (bench/peer/PeerSystem.ts).
 * Every call goes through the system's own public way in: for Slipway,
 * createLease and appendCommand.
 */
export interface LeaseSystem {
  /** For progress lines and errors. */
  readonly name: string;
  /**
   * A pool of `shape.resources` resources of `shape.slotsPerResource` slots
   * each, and its id. Slipway's blueprint makes its resources when leases
   * first need them; the peer's exist from the start.
   */
  createPool(name: string, shape: PoolShape): Promise<number>;
  /** A pool with at least `room` free slots on resources already made, so a new lease is served at once. */
  warmPool(name: string, room: number): Promise<number>;
  /** A new lease on the pool, through the system's ordinary path; its id. */
  createLease(poolId: number): Promise<number>;
  /** Appends a release of the lease; resolves once it is durably queued. */
  release(leaseId: number): Promise<void>;
  /** The pool's leases that are active now. */
  activeLeases(poolId: number): Promise<number[]>;
  /** How many of the pool's leases are in that state now. */
  countIn(poolId: number, state: Milestone): Promise<number>;
  /** True when no command of any object is queued or running. */
  quiet(): Promise<boolean>;
  /**
   * Housekeeping that a deployment does on a schedule, done here on a quiet
   * system just before each timed window, so that no figure pays for the
   * leftovers of the one before.
   */
  maintain(): Promise<void>;
  /** Starts noting when leases reach milestones, as the system announces them. */
  watch(): Promise<MilestoneWatch>;
  /** Waits for `work`, or fails as soon as a worker process dies. */
  whileRunning<T>(work: Promise<T>): Promise<T>;
}

export interface PoolShape {
  readonly resources: number;
  readonly slotsPerResource: number;
}

/** The moments of a lease's life that the figures time. */
export type Milestone = 'active' | 'destroyed';

export interface MilestoneWatch {
  /**
   * When each lease reached `milestone` (performance.now() of the
   * announcement's arrival here), in the order of `leaseIds`; waits until all have.
   */
  reachedAt(leaseIds: readonly number[], milestone: Milestone): Promise<number[]>;
  close(): Promise<void>;
}
