import { sql } from 'kysely';
import type { Db } from '../../../src/db/Database.ts';

export interface CapacitySamples {
  readonly count: number;
  /** The most resources of the blueprint seen not destroyed at once. */
  readonly peakLive: number;
  /** Every sight of a resource with more leases holding slots than it has slots. */
  readonly overbooked: string[];
}

/**
 * Looks at a blueprint's resources over and over while a test runs, each look
 * one snapshot: how many are live, and whether any holds more leases than it
 * has slots.
 */
export class CapacitySampler {
  private stopped = false;
  private readonly samples: { count: number; peakLive: number; overbooked: string[] } = { count: 0, peakLive: 0, overbooked: [] };
  private readonly loop: Promise<void>;

  constructor(
    private readonly db: Db,
    private readonly blueprintId: number,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const { rows } = await sql<{ live: number; overbooked: string[] }>`
        select
          (select count(*)::int from resources where blueprint_id = ${this.blueprintId} and state <> 'destroyed') as live,
          array(
            select 'resource ' || r.id || ': ' || count(s.slot) || ' of ' || r.capacity
            from resources r join resource_slots s on s.resource_id = r.id
            where r.blueprint_id = ${this.blueprintId}
            group by r.id having count(s.slot) > r.capacity
          ) as overbooked
      `.execute(this.db);
      const sample = rows[0]!;
      this.samples.count++;
      this.samples.peakLive = Math.max(this.samples.peakLive, sample.live);
      this.samples.overbooked.push(...sample.overbooked);
    }
  }

  /** What it has seen so far. */
  get seen(): CapacitySamples {
    return this.samples;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}
