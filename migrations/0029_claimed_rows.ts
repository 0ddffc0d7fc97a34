import { type Kysely, sql } from 'kysely';

/**
 * slipway_drain_claim also says which objects it locked, in three settings
 * local to its transaction (slipway.claimed_lease, slipway.claimed_resource,
 * slipway.claimed_blueprint: each an array of ids as text), so that the
 * statements after it in the same round trip read the rows of every object
 * it took (src/drain/sql/claimedRows.ts). A drain read only the rows of the
 * objects it asked for by name in the claim's round trip, and every other
 * object's in a round trip of its own after it: a busy worker's lane takes
 * most new work from the oldest wake-ups, unnamed, so most releases cost
 * that extra transaction. Same signature and effect otherwise, so workers
 * of the release before call it unchanged (they ignore the settings).
 *
 * The body is 0017's with the settings added after the lock.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create or replace function slipway_drain_claim(p_room int, p_want_kinds text[], p_want_ids bigint[], p_only_wanted boolean,
                                                   p_held_kinds text[], p_held_ids bigint[], p_preempting text[], p_channel text)
      returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
      as $fn$
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
        perform set_config('slipway.claimed_' || k.kind,
                           array(select t.id from unnest(v_kinds, v_ids) as t(kind, id) where t.kind = k.kind)::text, true)
        from unnest(array['lease', 'resource', 'blueprint']) as k(kind);
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
      $fn$;
  `.execute(db);
}

/**
 * Nothing to undo: the body has the old signature and effect, and the
 * release before runs on it, ignoring the settings.
 */
export async function down(): Promise<void> {}
