import { type Kysely, sql } from 'kysely';

/**
 * A drain step may apply a run of an object's commands, not only its head:
 * slipway_drain_runs answers up to p_length ready commands of each held
 * object, in queue order (see src/drain/sql/runs.ts for which commands may
 * follow one another in a step). An object that many others write to (a
 * resource whose leases end together gives back a slot per lease) is then
 * no longer served one command per step.
 *
 * slipway_drain_heads keeps its signature and effect, as the run of length
 * one: slipway_drain_claim calls it, and so do workers of the release
 * before, unchanged. So `down` leaves both as they are: the release before
 * calls only slipway_drain_heads, which does what it did (and `up` may
 * run again: it replaces).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- Up to p_length ready commands of each held object, in each queue's
    -- order (a running one first: its holder died mid-command; then the
    -- preempting kinds, named "<kind>.<command kind>"; then the rest by id),
    -- objects in the order given. An object with none is let go: its
    -- advisory lock given back, then its queue looked at once more in a
    -- fresh snapshot (each statement of a volatile function takes one), and
    -- a wake-up written for whatever is queued there (due at once if it is
    -- ready: its own wake-up may have found the lock taken).
    create or replace function slipway_drain_runs(p_kinds text[], p_ids bigint[], p_preempting text[], p_length int) returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        v_runs commands[];
      begin
        v_runs := array(
          select r.cmd from unnest(p_kinds, p_ids) with ordinality as o(kind, id, n)
          cross join lateral (
            select c as cmd, c.status = 'running' as running, c.target_kind || '.' || c.kind = any(p_preempting) as preempting
            from commands c
            where c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running')
              and (c.not_before <= now() or c.status = 'running')
            order by (c.status = 'running') desc, (c.target_kind || '.' || c.kind = any(p_preempting)) desc, c.id
            limit p_length
          ) as r
          order by o.n, r.running desc, r.preempting desc, (r.cmd).id
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

    create or replace function slipway_drain_heads(p_kinds text[], p_ids bigint[], p_preempting text[]) returns setof commands
      language sql
      as $fn$ select * from slipway_drain_runs(p_kinds, p_ids, p_preempting, 1) $fn$;
  `.execute(db);
}

export async function down(): Promise<void> {}
