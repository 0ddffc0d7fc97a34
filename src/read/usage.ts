import { type Selectable, sql } from 'kysely';
import type { BlueprintUsageSamplesTable } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';

/** Use as one collector pass sampled it (src/gc/sampleUsage.ts), for the whole system or one blueprint. */
export interface UsageSample {
  readonly at: Date;
  /** Live leases and resources by state. */
  readonly leases: Readonly<Record<string, number>>;
  readonly resources: Readonly<Record<string, number>>;
  /** Leases in the waiting line. */
  readonly waiting: number;
  /** Created → active of the leases made active since the sample before (null: none made active). */
  readonly waitP50Ms: number | null;
  readonly waitP95Ms: number | null;
  /** Commands appended and failed per minute since the sample before (whole system only; null in a first sample). */
  readonly commandsPerMinute: number | null;
  readonly failedPerMinute: number | null;
}

export interface Usage {
  /** The window's start; its end is the time of reading. */
  readonly from: Date;
  readonly to: Date;
  /** Oldest first. */
  readonly samples: UsageSample[];
}

/** What the charts show: the last hour. */
export const USAGE_WINDOW_MINUTES = 60;

type Counts = Record<string, number>;

/**
 * The samples of the last USAGE_WINDOW_MINUTES, for one blueprint or (no
 * `blueprintId`) summed over every blueprint. A few rows per collector
 * pass, found by the samples' time index: cheap whatever the size of the
 * history they summarize.
 */
export async function readUsage(db: Db, blueprintId?: number): Promise<Usage> {
  const { rows } = await sql<{
    pass_id: number;
    sampled_at: Date;
    to: Date;
    from: Date;
    commands_appended: number | null;
    commands_failed: number | null;
    wait_p50_ms: number | null;
    wait_p95_ms: number | null;
    gap_s: number | null;
  }>`
    select s.pass_id, s.sampled_at, s.commands_appended, s.commands_failed, s.wait_p50_ms, s.wait_p95_ms,
           now() as to, now() - make_interval(mins => ${USAGE_WINDOW_MINUTES}) as from,
           extract(epoch from s.sampled_at - (select max(p.sampled_at) from usage_samples p where p.pass_id < s.pass_id))::float8 as gap_s
    from usage_samples s
    where s.sampled_at > now() - make_interval(mins => ${USAGE_WINDOW_MINUTES})
    order by s.pass_id
  `.execute(db);
  const window = { from: rows[0]?.from ?? new Date(Date.now() - USAGE_WINDOW_MINUTES * 60_000), to: rows[0]?.to ?? new Date() };
  if (rows.length === 0) return { ...window, samples: [] };

  let perBlueprint = db
    .selectFrom('blueprint_usage_samples')
    .selectAll()
    .where(
      'pass_id',
      'in',
      rows.map((r) => r.pass_id),
    );
  if (blueprintId !== undefined) perBlueprint = perBlueprint.where('blueprint_id', '=', blueprintId);
  const parts = new Map<number, Selectable<BlueprintUsageSamplesTable>[]>();
  for (const part of await perBlueprint.execute()) parts.set(part.pass_id, [...(parts.get(part.pass_id) ?? []), part]);

  const perMinute = (count: number | null, gapS: number | null) => (count === null || !gapS ? null : (count * 60) / gapS);
  const samples = rows.map((row): UsageSample => {
    const of = parts.get(row.pass_id) ?? [];
    const own = blueprintId !== undefined ? of[0] : undefined;
    return {
      at: row.sampled_at,
      leases: summed(of.map((p) => p.leases as Counts)),
      resources: summed(of.map((p) => p.resources as Counts)),
      waiting: of.reduce((n, p) => n + p.leases_waiting, 0),
      // Percentiles do not add up: the system's own are kept with the sample.
      waitP50Ms: blueprintId === undefined ? row.wait_p50_ms : (own?.wait_p50_ms ?? null),
      waitP95Ms: blueprintId === undefined ? row.wait_p95_ms : (own?.wait_p95_ms ?? null),
      commandsPerMinute: blueprintId === undefined ? perMinute(row.commands_appended, row.gap_s) : null,
      failedPerMinute: blueprintId === undefined ? perMinute(row.commands_failed, row.gap_s) : null,
    };
  });
  return { ...window, samples };
}

function summed(all: readonly Counts[]): Counts {
  const total: Counts = {};
  for (const counts of all) for (const [state, n] of Object.entries(counts)) total[state] = (total[state] ?? 0) + n;
  return total;
}
