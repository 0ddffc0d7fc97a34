import { type Kysely, sql } from 'kysely';

/**
 * Two of the drain's statements did work in proportion to the backlog, not
 * to the step, so every step cost more the more work waited.
 *
 * slipway_settle_commands (0013) found the queued work a settled command
 * supersedes with a join that its cached generic plan ran as a hash join
 * over every queued command in the database: under a backlog (thousands of
 * releases queued) each step's settlement read them all, and it was the
 * drain's dearest statement under load (`npm run bench:profile`). Now the superseded commands are looked up
 * per settled object, through the queue index (commands_queue: target,
 * then id, queued and running only), into an array first, and cancelled by
 * primary key, as the status update already was. Same signature and
 * effect, so workers of the release before call it unchanged.
 *
 * slipway_drain_claim (0015) ordered every due wake-up (the objects the
 * step's follow-ups woke first, then the oldest) to take the first few: a
 * scan and a sort of the whole due backlog at every step. Now the woken
 * objects are probed by key and the oldest read from the run_at index, up
 * to the room, and only those are ordered. Same signature and effect.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create or replace function slipway_settle_commands(p_settles jsonb, p_events jsonb) returns void
      language plpgsql volatile
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        -- The ids as an array too, so the generic plan finds the commands
        -- by their key: joined only to the document, it may hash the table.
        v_ids bigint[] := array(select (s.doc->>'id')::bigint from jsonb_array_elements(p_settles) as s(doc));
        v_cancel bigint[];
        v_cancel_messages text[];
      begin
        if jsonb_array_length(p_events) > 0 then
          insert into events (target_kind, target_id, command_id, type, from_state, to_state, message, actor, source, data)
          select e.doc->>'target_kind', (e.doc->>'target_id')::bigint, (e.doc->>'command_id')::bigint, e.doc->>'type',
                 e.doc->>'from_state', e.doc->>'to_state', e.doc->>'message', e.doc->>'actor', e.doc->>'source',
                 nullif(e.doc->'data', 'null'::jsonb)
          from jsonb_array_elements(p_events) with ordinality as e(doc, n)
          order by e.n;
        end if;
        -- Each settled object's own queue, one index probe per object:
        -- OFFSET 0 keeps the planner from flattening the lateral subquery
        -- into the join it would hash over the whole queue again.
        select array_agg(q.id), array_agg(s.supersede_message) into v_cancel, v_cancel_messages
        from jsonb_to_recordset(p_settles) as s(id bigint, target_kind text, target_id bigint, supersedes text[], supersede_message text)
        cross join lateral (
          select c.id from commands c
          where c.target_kind = s.target_kind and c.target_id = s.target_id
            and c.status = 'queued' and c.kind = any(s.supersedes) and c.id <> s.id
          offset 0
        ) as q
        where cardinality(s.supersedes) > 0;
        if v_cancel is not null then
          update commands c set status = 'cancelled', finished_at = now(), message = u.message
          from unnest(v_cancel, v_cancel_messages) as u(id, message)
          where c.id = any(v_cancel) and c.id = u.id;
        end if;
        update commands c
        set status = case when s.status = 'yield' then 'queued' else s.status end,
            message = s.message,
            attempts = c.attempts + (s.status = 'yield')::int,
            not_before = case when s.status = 'yield' then now() + make_interval(secs => s.retry_secs) else c.not_before end,
            finished_at = case when s.status = 'yield' then c.finished_at else now() end,
            started_at = case when s.status = 'yield' then c.started_at else coalesce(c.started_at, now()) end
        from jsonb_to_recordset(p_settles) as s(id bigint, status text, message text, retry_secs float8)
        where c.id = any(v_ids) and c.id = s.id;
      end
      $fn$;

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
 * Nothing to undo: the new bodies have the old signatures and effects, and
 * the release before runs on them (docs/upgrades.md), so rolling the schema
 * back to 0016 keeps them rather than restoring bodies that scan the backlog.
 */
export async function down(): Promise<void> {}
