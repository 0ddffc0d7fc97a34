import type pg from 'pg';
import { simpleQueryText } from '../db/preparedText.ts';
import type { Logger } from '../log.ts';
import type { Planned } from './laneTypes.ts';
import { asynchronously } from './sql/laneTransactions.ts';
import { markRunningStatement } from './sql/markRunning.ts';

/**
 * Marks commands `running` whose driver calls outlive their step's join
 * window (DrainLane's EFFECT_JOIN_MS): a VM booting shows as running within 50 ms of
 * its call going out. A call that returns within the window is committed
 * with its outcome in the same step, queued to done, with no mark: a mark
 * would cost a transaction and a row version (with an entry in most of the
 * commands' indexes, as status is in their predicates) only to be
 * overwritten a moment later, and the calls were made to wait for it. The
 * marks of one step share one asynchronously committed update, on the pool:
 * the lane's connection goes on with the step. They are hints (a crash loses
 * at most a mark; the command is applied again either way), so a failed one
 * is logged, never fatal; the lane waits for a mark before it commits the
 * outcome that replaces it, and the update touches only commands still
 * queued.
 */
export class RunningMarks {
  private readonly calledIds = new Set<number>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
  ) {}

  /** A driver call goes out for this command. */
  called(commandId: number): void {
    this.calledIds.add(commandId);
  }

  /** Marks running the commands of `planned` whose driver was called, and records the mark on each. */
  markOutlived(planned: readonly Planned[]): void {
    const marking = planned.filter((p) => this.calledIds.has(p.held.head.id));
    if (marking.length === 0) return;
    const marked = this.update(marking.map((p) => p.held.head.id));
    for (const p of marking) p.marked = marked;
  }

  private async update(ids: number[]): Promise<void> {
    let client: pg.PoolClient | undefined;
    let failure: Error | undefined;
    try {
      client = await this.pool.connect();
      await client.query(await simpleQueryText(client, asynchronously([markRunningStatement(ids)])));
    } catch (error) {
      failure = error as Error;
      this.log.warn({ err: error, commands: ids }, 'marking commands running failed (a hint only: their calls go on)');
    } finally {
      client?.release(failure);
    }
  }
}
