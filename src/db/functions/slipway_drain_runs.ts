/**
 * Up to p_length ready commands of each held object, in queue order, letting
 * go of objects with none (src/drain/sql/runs.ts).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_drain_runs(p_kinds text[], p_ids bigint[], p_preempting text[], p_length integer)
 RETURNS SETOF public.commands
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
AS $function$
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
      $function$`;
