import { type Kysely, sql } from 'kysely';

/**
 * A queue's next commands found through its index, however long the queue.
 *
 * slipway_drain_runs (and slipway_drain_heads, the run of length one, which
 * every claim calls) ordered an object's whole queue by "running first,
 * then the preempting kinds, then by id" to take its first few: each step
 * of an object with thousands of commands queued (a blueprint given a
 * backlog of new leases' requests) read and sorted all of them, so
 * draining such a queue cost the square of its length. Now each of the
 * three parts is read on its own, in id order, stopping at the run's
 * length:
 *
 * - the running commands (preempting kinds first), from a partial index of
 *   their own (a command is `running` only while a slow driver call is in
 *   flight or after its holder died mid-call, so the index is nearly empty);
 * - the preempting kinds, only for an object kind that has any (a
 *   blueprint has none, so its queue is not read for them; a lease's or a
 *   resource's queue is short, or read once up to its end);
 * - the rest, from the queue's own index (commands_queue), in id order.
 *
 * The queued commands are asked for as "queued or running, and not
 * running": the first half is commands_queue's own predicate, which the
 * planner then needs not check again, so it prefers that index to
 * commands_by_target (same columns, every command of the object, settled
 * ones included) even when their sizes tie, as on a fresh database whose
 * commands are nearly all queued. Its cached plan walking commands_by_target
 * read every settled command of a busy object at every step.
 *
 * What it answers is as before, so workers of the release before run
 * unchanged on it, and `down` leaves it (`up` may run again: it replaces).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create index if not exists commands_running on commands (target_kind, target_id, id) where status = 'running';

    -- Commands are spread over many objects (each lease and resource has a
    -- few), whatever ANALYZE happened to see: on a fresh database, right
    -- after a burst of new leases, nearly every command is a request queued
    -- at one blueprint, and it then counts one distinct target. Cached
    -- generic plans, made from that, expect every object to have most of
    -- the table's commands and walk the primary key instead of an object's
    -- queue, reading the whole table for a lease's one command. About 20
    -- commands an object is what the tables look like in use; ANALYZE
    -- applies it from now on.
    alter table commands alter column target_id set (n_distinct = -0.05);
    analyze commands;

    create or replace function slipway_drain_runs(p_kinds text[], p_ids bigint[], p_preempting text[], p_length int) returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
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
                  and c.not_before <= now() and c.target_kind || '.' || c.kind = any(p_preempting)
                order by c.id limit p_length)
              union all
              (select c, 3, c.id from commands c
                where c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running') and c.status <> 'running'
                  and c.not_before <= now() and not coalesce(c.target_kind || '.' || c.kind = any(p_preempting), false)
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
  await sql`alter table commands alter column target_id reset (n_distinct)`.execute(db);
  await sql`drop index if exists commands_running`.execute(db);
}
