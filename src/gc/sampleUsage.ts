import { sql } from 'kysely';
import type { Db } from '../db/Database.ts';
import { liveStates } from '../domain/lifecycle.ts';
import { waitingLeases } from '../db/waitingLeases.ts';
import type { GcPass, StepReport } from './GcPass.ts';

/**
 * Records how Slipway is used as of this pass, for the web UI's charts
 * (src/read/usage.ts): the commands appended and failed since the previous
 * sample, how long the leases made active since then waited (created →
 * active, p50 and p95), for the whole system and per blueprint, and per
 * blueprint its live leases and resources by state and its waiting line.
 *
 * Each count reaches rows by key or by a small index: commands and events
 * after the previous sample's marks (their primary keys), failed commands
 * through the index that holds only rare statuses, live objects through the
 * state indexes. So a sample costs what happened since the last one, not
 * the size of the history. The marks are ids, and ids are handed out before
 * their transactions commit: a row committed after a sample with an id below
 * its mark is not counted. Charts of a minute's use can live with that.
 */
export async function sampleUsage(pass: GcPass): Promise<StepReport> {
  const found = await pass.db.transaction().execute(async (trx) => {
    const previous = await trx.selectFrom('usage_samples').selectAll().orderBy('pass_id', 'desc').limit(1).executeTakeFirst();
    const sample = await trx
      .insertInto('usage_samples')
      .values({
        pass_id: pass.passId,
        last_command_id: sql<number>`(select coalesce(max(id), 0) from commands)`,
        last_event_id: sql<number>`(select coalesce(max(id), 0) from events)`,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // Leases made active since the previous sample: state events after its
    // mark. A first sample has no previous one to count from: its range is
    // empty and its counts stay null.
    const activated = sql`(
      select l.blueprint_id, extract(epoch from e.created_at - l.created_at) * 1000 as wait_ms
      from events e join leases l on l.id = e.target_id
      where e.id > ${previous?.last_event_id ?? sample.last_event_id} and e.id <= ${sample.last_event_id}
        and e.target_kind = 'lease' and e.type = 'state' and e.to_state = 'active')`;
    if (previous) {
      await sql`
        update usage_samples set
          commands_appended = (select count(*)::int from commands where id > ${previous.last_command_id} and id <= ${sample.last_command_id}),
          -- The previous sample's time read in SQL: a JS Date would drop its microseconds.
          commands_failed = (select count(*)::int from commands
            where status = 'failed' and finished_at <= now()
              and finished_at > (select sampled_at from usage_samples where pass_id = ${previous.pass_id})),
          (leases_activated, wait_p50_ms, wait_p95_ms) = (select ${waitFigures} from ${activated} a)
        where pass_id = ${pass.passId}
      `.execute(trx);
    }
    const { rows } = await sql<{ id: number }>`
      insert into blueprint_usage_samples (pass_id, blueprint_id, leases, leases_waiting, resources, leases_activated, wait_p50_ms, wait_p95_ms)
      select ${pass.passId}, b.id, ${byState('leases', 'lease')}, ${waitingAt(trx)}, ${byState('resources', 'resource')},
             ${previous ? sql`coalesce(w.activated, 0)` : sql`null::int`}, w.p50, w.p95
      from blueprints b
      left join (select a.blueprint_id, ${waitFigures} from ${activated} a group by a.blueprint_id) w on w.blueprint_id = b.id
      returning blueprint_id as id
    `.execute(trx);
    return rows.length;
  });
  return { found, actions: [], truncated: false };
}

/** Count, p50 and p95 of the waits `a.wait_ms` (null percentiles when there are none). */
const waitFigures = sql`count(*)::int as activated,
  round(percentile_cont(0.5) within group (order by a.wait_ms))::int as p50,
  round(percentile_cont(0.95) within group (order by a.wait_ms))::int as p95`;

/** Blueprint `b`'s live objects of a table by state, as `{"active": 3, …}`. */
function byState(table: 'leases' | 'resources', kind: 'lease' | 'resource') {
  return sql`(select coalesce(jsonb_object_agg(s.state, s.n), '{}') from (
    select state, count(*)::int as n from ${sql.table(table)} o
    where o.blueprint_id = b.id and o.state = any(${liveStates(kind)}::text[]) group by state) s)`;
}

/** How many leases wait in blueprint `b`'s line. */
function waitingAt(db: Db) {
  return waitingLeases(db).select(sql<number>`count(*)::int`.as('n')).where('w.blueprint_id', '=', sql.ref<number>('b.id'));
}
