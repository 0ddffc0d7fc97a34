import { type Kysely, sql } from 'kysely';
import { up as queueHeadsByIndex } from './0022_queue_heads_by_index.ts';

/**
 * An object's queue is read through the object's own index, whatever the
 * statistics say.
 *
 * slipway_drain_runs (0022) asks for an object's queued commands that are
 * due: its target, "queued or running, not running", and `not_before <=
 * now()`. That last condition is also what commands_unsettled (the sweeper's
 * and the metrics' index on `not_before`, over every unsettled command) is
 * for, and the two partial indexes share their predicate. A generic plan
 * made from statistics gathered while few commands were unsettled costs
 * both at about one row and picks the smaller index, commands_unsettled: it
 * then reads every due command of every object, for each object a step
 * holds, filtering out far more rows than it returns (`npm run
 * bench:profile` with auto_explain shows such plans).
 *
 * The condition is now written `(not_before <= now()) is true`, which means
 * the same (the column is NOT NULL) but is no index condition, so the only
 * index that narrows the scan is the object's own (commands_queue).
 *
 * The function also plans without sequential scans. Its cached generic
 * plans are made on a lane's connection the first time it runs them and
 * kept until the table is next analyzed: on a fresh database (a new
 * deployment, a test, a benchmark) that is when the tables are nearly empty,
 * a sequential scan is the cheapest plan, and autovacuum's first ANALYZE
 * comes up to a minute later: until then each object's read would scan
 * every command of the table. Each of its
 * statements reads an object's commands by the object's key, so an index
 * path always exists and the setting only takes the sequential scan off
 * the table. (Set on the claim and the settlement as well, it made the
 * benchmark's latencies worse: the claim's read of the oldest due wake-ups
 * is better left to the planner.)
 *
 * What it answers is as before, so workers of the release before run
 * unchanged on it; `down` puts back 0022's function.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create or replace function slipway_drain_runs(p_kinds text[], p_ids bigint[], p_preempting text[], p_length int) returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
      set enable_seqscan = off
      as $fn$
      declare
        v_runs commands[];
        -- The object kinds that have preempting commands ("<kind>.<command kind>").
        v_preempting_kinds text[] := array(select distinct split_part(p, '.', 1) from unnest(p_preempting) as p);
      begin
        v_runs := array(
          select r.cmd from unnest(p_kinds, p_ids) with ordinality as o(kind, id, n)
          cross join lateral (
            select q.cmd, q.rank from (
              (select c as cmd, case when c.target_kind || '.' || c.kind = any(p_preempting) then 0 else 1 end as rank, c.id
                from commands c
                where c.target_kind = o.kind and c.target_id = o.id and c.status = 'running'
                order by 2, c.id limit p_length)
              union all
              (select c, 2, c.id from commands c
                where o.kind = any(v_preempting_kinds)
                  and c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running') and c.status <> 'running'
                  and (c.not_before <= now()) is true and c.target_kind || '.' || c.kind = any(p_preempting)
                order by c.id limit p_length)
              union all
              (select c, 3, c.id from commands c
                where c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running') and c.status <> 'running'
                  and (c.not_before <= now()) is true and not coalesce(c.target_kind || '.' || c.kind = any(p_preempting), false)
                order by c.id limit p_length)
            ) as q
            order by q.rank, q.id
            limit p_length
          ) as r
          order by o.n, r.rank, (r.cmd).id
        );
        return query select * from unnest(v_runs);
        perform pg_advisory_unlock(object_lock_key(o.kind, o.id))
        from unnest(p_kinds, p_ids) as o(kind, id)
        where not exists (select 1 from unnest(v_runs) h where h.target_kind = o.kind and h.target_id = o.id);
        perform slipway_wake_objects(null, array_agg(d.kind), array_agg(d.id), array_agg(d.due))
        from (
          select c.target_kind as kind, c.target_id as id, min(c.not_before) as due
          from unnest(p_kinds, p_ids) as o(kind, id)
          join commands c on c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running')
          where not exists (select 1 from unnest(v_runs) h where h.target_kind = o.kind and h.target_id = o.id)
          group by c.target_kind, c.target_id
        ) as d
        having count(*) > 0;
      end
      $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await queueHeadsByIndex(db);
}
