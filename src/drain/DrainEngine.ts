import type { Database } from '../db/Database.ts';
import { ChannelListener } from '../db/ChannelListener.ts';
import type { DriverRegistry } from '../drivers/registry.ts';
import type { PartHealth } from '../health/ProcessHealth.ts';
import type { Logger } from '../log.ts';
import type { ObjectRef } from '../db/objectTables.ts';
import { namedObjects } from '../queue/wakeSignal.ts';
import { WAKE_CHANNEL } from '../db/channels.ts';
import { DrainLane } from './DrainLane.ts';

/** The most objects one lane holds at once: one step's batch. */
export const LANE_SIZE = 64;

export interface EngineOptions {
  /** Lanes at once, each on a connection of its own. */
  readonly lanes: number;
  /** How often to look for due wake-ups without a signal. */
  readonly pollMs: number;
  readonly chaosDelayMs: number;
  readonly handOffAfterMs: number;
}

/**
 * A worker's drains: lanes (DrainLane) that take due wake-ups and drain
 * their objects, started when workers are signalled (NOTIFY slipway_wake,
 * sent after the commits that wrote the wake-ups), when a wake-up written
 * for later falls due, and by a poll, the backstop for a signal lost
 * between a commit and its NOTIFY.
 *
 * At most one lane is taking its first wake-ups at a time, so a burst of
 * signals starts lanes one by one rather than all at once for the same few
 * objects; a lane that took a full batch starts another, and a signal that
 * came meanwhile is looked at again once that claim is done. A running lane
 * also takes new wake-ups at each step, while it has room; a signal that
 * starts no lane (the worker runs all it may) asks the running lanes to look
 * (DrainLane.lookAgain), so one whose every object waits on a slow driver
 * call takes the new work at once rather than when a call returns.
 */
export class DrainEngine {
  private running = 0;
  private claiming = false;
  private signalled = false;
  private readonly lanes = new Set<Promise<unknown>>();
  private readonly runningLanes = new Set<DrainLane>();
  private readonly stopping = new AbortController();
  private listener: ChannelListener | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly database: Pick<Database, 'pool' | 'db'>,
    private readonly drivers: DriverRegistry,
    private readonly log: Logger,
    private readonly options: EngineOptions,
  ) {}

  async start(health?: PartHealth): Promise<void> {
    const handlers = { onMessage: (payload: string | undefined) => this.wake(namedObjects(payload)), onResync: () => this.wake() };
    this.listener = await ChannelListener.open(this.database.pool, { [WAKE_CHANNEL]: handlers }, health);
    this.poll();
  }

  /** Stops taking wake-ups; resolves once every lane has finished the step it is in. */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.listener?.close();
    await Promise.all(this.lanes);
  }

  /**
   * Starts a lane if one may start now, or remembers to look again once the
   * lane taking its first wake-ups is done. `named`: the objects the signal
   * named, which the lane takes first and whose rows it reads in its first
   * round trip (a signal that must wait is looked at again without them:
   * by then they may be taken).
   */
  private wake(named: readonly ObjectRef[] = []): void {
    if (this.stopping.signal.aborted) return;
    if (this.claiming || this.running >= this.options.lanes) {
      this.signalled = true;
      for (const lane of this.runningLanes) lane.lookAgain();
      return;
    }
    this.signalled = false;
    this.claiming = true;
    this.running++;
    const lane = new DrainLane(this.database, this.drivers, this.log, {
      maxHeld: LANE_SIZE,
      chaosDelayMs: this.options.chaosDelayMs,
      handOffAfterMs: this.options.handOffAfterMs,
      stopping: this.stopping.signal,
      named,
    });
    this.runningLanes.add(lane);
    let claimed = 0;
    const done = lane
      .run((n) => {
        claimed = n;
        this.claimed(n);
      })
      .catch((error) => this.log.warn({ err: error }, 'drain lane could not start'))
      .finally(() => {
        if (this.claiming && claimed === 0) this.claimed(0);
        this.running--;
        this.runningLanes.delete(lane);
        this.lanes.delete(done);
        // A lane that ends may have been what kept a signal waiting.
        if (this.signalled) this.wake();
      });
    this.lanes.add(done);
  }

  /** A lane's first claim is done: a full one means more may be waiting; so may a signal that came meanwhile. */
  private claimed(n: number): void {
    this.claiming = false;
    if (n >= LANE_SIZE || this.signalled) this.wake();
  }

  /**
   * Looks for due wake-ups every pollMs, or sooner when one written for later
   * falls due (a yielded command's retry, a follow-up's not-before).
   */
  private poll(): void {
    if (this.stopping.signal.aborted) return;
    void this.database.pool
      .query<{ ms: number | null }>('select (extract(epoch from min(run_at) - now()) * 1000)::float8 as ms from drain_wakeups')
      .then(({ rows }) => {
        const ms = rows[0]?.ms;
        if (ms !== null && ms !== undefined && ms <= 0) this.wake();
        return ms !== null && ms !== undefined && ms > 0 ? Math.min(ms, this.options.pollMs) : this.options.pollMs;
      })
      .catch(() => this.options.pollMs)
      .then((nextMs) => {
        if (this.stopping.signal.aborted) return;
        this.timer = setTimeout(() => this.poll(), Math.max(nextMs, 5));
      });
  }
}
