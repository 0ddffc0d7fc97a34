import type { Db } from '../db/Database.ts';
import { peekDueTimes } from '../gc/dueTimes.ts';
import { appendDueWork } from '../gc/dueWork.ts';
import type { Logger } from '../log.ts';

/** Past a due time by this much before looking: the database's clock and our timer's are not the same one. */
const AFTER_DUE_MS = 5;

/**
 * The time-driven work of one worker: each lease's deadlines (expiry,
 * heartbeat, wait) and each resource's health checks, asked for as
 * `system:gc` within a second or so of their due times, whatever the
 * collector's interval.
 *
 * It looks (`peekDueTimes`, one statement of index reads) at most every
 * `pollMs`, and sooner when the nearest due time it read comes first: a
 * deadline known a while ahead is met at its time, and one set less than a
 * poll before it passes (a lease created with a 1 s deadline) at the next
 * look. When something is due it appends the commands (`appendDueWork`)
 * under the time-driven work's lock: every worker runs a timekeeper and
 * there is no leader, and the one that finds the lock taken leaves the work
 * to its holder and looks again later. A batch that comes back full is
 * followed by another at once.
 *
 * Like the sweeper, a failed look (the database restarting) is logged and
 * tried again at the next poll, on a fresh pooled connection.
 */
export class Timekeeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly pollMs: number,
    /** At most this many releases, and as many checks, per transaction. */
    private readonly batchSize: number,
  ) {}

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick()
        .catch((error: unknown) => {
          this.log.warn({ err: error }, 'timekeeper failed to look for due work');
          return this.poll();
        })
        .then((next) => this.schedule(next));
    }, delayMs);
  }

  /** A poll's delay, a little less now and then so that the workers' looks spread out rather than run in step. */
  private poll(): number {
    return this.pollMs * (0.8 + Math.random() / 5);
  }

  /** One look, and the work it found due; resolves to how long to wait before the next. */
  private async tick(): Promise<number> {
    const { dueNow, nextDueInMs } = await peekDueTimes(this.db);
    let again = false;
    if (dueNow) {
      const reports = await appendDueWork(this.db, ['leases', 'checks'], { limit: this.batchSize, waitForLock: false });
      if (reports) {
        const asked = Object.values(reports).reduce((n, step) => n + step.actions.filter((a) => a.commandId !== undefined && !a.coalesced).length, 0);
        if (asked > 0) this.log.debug({ leases: reports.leases?.found, checks: reports.checks?.found, asked }, 'timekeeper asked for due work');
        again = Object.values(reports).some((step) => step.truncated);
      }
    }
    if (again) return 0;
    return nextDueInMs === null ? this.poll() : Math.min(this.poll(), Math.max(0, nextDueInMs) + AFTER_DUE_MS);
  }
}
