/**
 * The wake-up of a set of objects: one graphile-worker job per object, keyed
 * so an object has at most one (see src/queue/wakeObjects.ts for its shape).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_wake_objects(tasks text[], kinds text[], ids bigint[], run_ats timestamp with time zone[])
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
      begin
        insert into drain_wakeups as w (target_kind, target_id, run_at)
        select u.kind, u.id, min(coalesce(u.run_at, now()))
        from unnest(kinds, ids, run_ats) as u(kind, id, run_at)
        group by u.kind, u.id
        order by object_drain_job_key(u.kind, u.id)
        on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
      end
      $function$`;
