import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { handledVersions } from '../domain/commandKinds.ts';
import type { Logger } from '../log.ts';

/**
 * This worker's row in `workers`: who it is and which command kinds and
 * versions it can run, kept fresh by a heartbeat. Rows whose heartbeat is
 * long gone are pruned by any live worker.
 */
export class WorkerRegistry {
  readonly id = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly heartbeatMs: number,
  ) {}

  async register(): Promise<void> {
    await this.db
      .insertInto('workers')
      .values({ id: this.id, hostname: os.hostname(), pid: process.pid, handles: JSON.stringify(handledVersions()) })
      .execute();
    this.timer = setInterval(() => {
      this.beat().catch((error) => this.log.warn({ err: error }, 'worker heartbeat failed'));
    }, this.heartbeatMs);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    await this.db.updateTable('workers').set({ heartbeat_at: sql<Date>`now()` }).where('id', '=', this.id).execute();
    await this.db
      .deleteFrom('workers')
      .where('heartbeat_at', '<', sql<Date>`now() - make_interval(secs => ${(this.heartbeatMs * 10) / 1000})`)
      .execute();
  }

  async deregister(): Promise<void> {
    clearInterval(this.timer);
    await this.db.deleteFrom('workers').where('id', '=', this.id).execute();
  }
}
