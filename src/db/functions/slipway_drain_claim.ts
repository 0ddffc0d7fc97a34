/**
 * Takes due wake-ups and locks their objects, answering each one's first
 * command in the same round trip (src/drain/sql/claim.ts is its TypeScript
 * side).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_drain_claim(p_room integer, p_want_kinds text[], p_want_ids bigint[], p_only_wanted boolean, p_held_kinds text[], p_held_ids bigint[], p_preempting text[], p_channel text)
 RETURNS SETOF public.commands
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
      declare
        v_kinds text[];
        v_ids bigint[];
      begin
        with wanted as (
          select w.target_kind, w.target_id, w.run_at
          from unnest(p_want_kinds, p_want_ids) as u(kind, id)
          join drain_wakeups w on w.target_kind = u.kind and w.target_id = u.id
          where p_room > 0 and w.run_at <= now()
          for update of w skip locked
        ),
        oldest as (
          select w.target_kind, w.target_id, w.run_at from drain_wakeups w
          where not p_only_wanted and w.run_at <= now()
          order by w.run_at
          limit p_room
          for update skip locked
        ),
        due as (
          select d.target_kind, d.target_id from (
            select wt.target_kind, wt.target_id, 0 as rank, wt.run_at from wanted wt
            union all
            select o.target_kind, o.target_id, 1, o.run_at from oldest o
          ) as d
          group by d.target_kind, d.target_id
          order by min(d.rank), min(d.run_at)
          limit p_room
        ),
        taken as (
          delete from drain_wakeups w using due d
          where w.target_kind = d.target_kind and w.target_id = d.target_id
          returning w.target_kind, w.target_id
        ),
        locked as (
          select t.target_kind, t.target_id from taken t
          where case
            when exists (select 1 from unnest(p_held_kinds, p_held_ids) as h(kind, id) where h.kind = t.target_kind and h.id = t.target_id) then false
            else pg_try_advisory_lock(object_lock_key(t.target_kind, t.target_id))
          end
        )
        select array_agg(l.target_kind), array_agg(l.target_id) into v_kinds, v_ids from locked l;
        if exists (
          select 1 from drain_wakeups w join unnest(p_want_kinds, p_want_ids) as u(kind, id)
            on w.target_kind = u.kind and w.target_id = u.id
          where w.run_at <= now()
        ) then
          perform pg_notify(p_channel, '');
        end if;
        if v_kinds is not null then
          return query select * from slipway_drain_heads(v_kinds, v_ids, p_preempting);
        end if;
      end
      $function$`;
