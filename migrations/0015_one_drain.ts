import { type Kysely, sql } from 'kysely';

/**
 * One drain engine for every kind of object (src/drain/DrainEngine.ts), woken
 * through a table of our own instead of graphile-worker jobs.
 *
 * - drain_wakeups: one row per object that has work due at run_at. It is
 *   written in the same durable transaction as the command that needs it
 *   (slipway_wake_objects, called by slipway_append_command and by the
 *   drain's follow-ups), so no command is ever stranded; the signal that
 *   tells workers to look (NOTIFY slipway_wake) travels after that commit,
 *   in an asynchronously committed transaction of its own
 *   (src/queue/wakeSignal.ts): PostgreSQL holds a database-wide lock through
 *   the WAL flush of every committing transaction that notified, so NOTIFY
 *   inside a durable commit serialises every such commit.
 * - slipway_wake_objects keeps its signature (the append function of 0011
 *   calls it) but upserts wake-up rows, never moving one later. Rows are
 *   written in job-key order (object_drain_job_key), the order every
 *   transaction that wakes several objects uses, so two of them rarely
 *   cross; the drain retries a commit PostgreSQL aborts as a deadlock.
 * - slipway_drain_claim / slipway_drain_heads: see src/drain/sql/claim.ts
 *   and src/drain/sql/heads.ts, the TypeScript side of each.
 *
 * The functions of the per-object drain and of the lease batches (0009,
 * 0010, 0012, 0013) are dropped: this version's engine does not call them,
 * and they only ever ran with graphile-worker drain jobs, which no version
 * from this one on queues. Workers of the version before therefore stop
 * draining once this migration has run (their drain jobs fail and no new
 * ones come); roll out by starting workers of this version first (see
 * docs/upgrades.md). Objects whose old drain jobs were still waiting get
 * wake-up rows here, and those jobs are removed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table drain_wakeups (
      target_kind text not null check (target_kind in ('blueprint', 'resource', 'lease')),
      target_id bigint not null,
      run_at timestamptz not null default now(),
      primary key (target_kind, target_id)
    );
    create index drain_wakeups_due on drain_wakeups (run_at);

    create or replace function slipway_wake_objects(tasks text[], kinds text[], ids bigint[], run_ats timestamptz[]) returns void
      language sql
      as $fn$
        insert into drain_wakeups as w (target_kind, target_id, run_at)
        select u.kind, u.id, min(coalesce(u.run_at, now()))
        from unnest(kinds, ids, run_ats) as u(kind, id, run_at)
        group by u.kind, u.id
        order by object_drain_job_key(u.kind, u.id)
        on conflict (target_kind, target_id) do update set run_at = least(w.run_at, excluded.run_at)
      $fn$;

    -- The next ready command of each held object (a running one first: its
    -- holder died mid-command; then the preempting kinds, named
    -- "<kind>.<command kind>"; then the rest in order). An object with none
    -- is let go: its advisory lock given back, then its queue looked at once
    -- more in a fresh snapshot (each statement of a volatile function takes
    -- one), and a wake-up written for whatever is queued there (due at once
    -- if it is ready: its own wake-up may have found the lock taken).
    create function slipway_drain_heads(p_kinds text[], p_ids bigint[], p_preempting text[]) returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        v_heads commands[];
      begin
        v_heads := array(
          select h.cmd from unnest(p_kinds, p_ids) as o(kind, id)
          cross join lateral (
            select c as cmd from commands c
            where c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running')
              and (c.not_before <= now() or c.status = 'running')
            order by (c.status = 'running') desc, (c.target_kind || '.' || c.kind = any(p_preempting)) desc, c.id
            limit 1
          ) as h
        );
        return query select * from unnest(v_heads);
        perform pg_advisory_unlock(object_lock_key(o.kind, o.id))
        from unnest(p_kinds, p_ids) as o(kind, id)
        where not exists (select 1 from unnest(v_heads) h where h.target_kind = o.kind and h.target_id = o.id);
        perform slipway_wake_objects(null, array_agg(d.kind), array_agg(d.id), array_agg(d.due))
        from (
          select c.target_kind as kind, c.target_id as id, min(c.not_before) as due
          from unnest(p_kinds, p_ids) as o(kind, id)
          join commands c on c.target_kind = o.kind and c.target_id = o.id and c.status in ('queued', 'running')
          where not exists (select 1 from unnest(v_heads) h where h.target_kind = o.kind and h.target_id = o.id)
          group by c.target_kind, c.target_id
        ) as d
        having count(*) > 0;
      end
      $fn$;

    -- Takes up to p_room due wake-ups, those of p_want first (the objects
    -- the caller's own commit just woke; only those with p_only_wanted), and
    -- deletes them; locks each
    -- object not in p_held (the caller's session already holds those, and
    -- looks at their queues again before it lets go) whose advisory lock is
    -- free. Returns the head of each object it locked (slipway_drain_heads,
    -- which lets go of those with nothing ready). A wake-up whose object
    -- another drain holds is dropped too: that drain looks again as it
    -- lets go. If due wake-ups of p_want are left for want of room, other
    -- workers are told (NOTIFY; the caller commits this asynchronously).
    create function slipway_drain_claim(p_room int, p_want_kinds text[], p_want_ids bigint[], p_only_wanted boolean,
                                        p_held_kinds text[], p_held_ids bigint[], p_preempting text[], p_channel text)
      returns setof commands
      language plpgsql
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        v_kinds text[];
        v_ids bigint[];
      begin
        with due as (
          select w.target_kind, w.target_id from drain_wakeups w
          where w.run_at <= now()
            and (not p_only_wanted or (w.target_kind, w.target_id) in (select * from unnest(p_want_kinds, p_want_ids)))
          order by (w.target_kind, w.target_id) in (select * from unnest(p_want_kinds, p_want_ids)) desc, w.run_at
          limit p_room
          for update skip locked
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

    insert into drain_wakeups (target_kind, target_id, run_at)
    select c.target_kind, c.target_id, min(c.not_before) from commands c
    where c.status in ('queued', 'running')
    group by c.target_kind, c.target_id
    on conflict do nothing;
    select graphile_worker.remove_job(j.key) from graphile_worker.jobs j
    where j.task_identifier in ('drain_lease', 'drain_resource', 'drain_blueprint') and j.key is not null;

    drop function slipway_drain_start_many(text, bigint[], text[], text);
    drop function slipway_drain_next_many(text, bigint[], text[], text, text, jsonb);
    drop function slipway_drain_start(text, bigint, text[], text);
    drop function slipway_drain_next(text, bigint, text[], text, text, jsonb);
    drop function slipway_lock_object_versions(text, bigint[], integer[]);
    drop function slipway_lock_object_version(text, bigint, integer);
    drop function slipway_lock_object_row(text, bigint);
    drop function slipway_lock_object(text, bigint);
    drop function slipway_queue_head(text, bigint, text[]);
    drop function slipway_queue_look(text, bigint);
    drop function slipway_settle_command(bigint, text, bigint, text, text, double precision, jsonb, text[], text);
  `.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('0015_one_drain cannot be undone: the engines before it are gone from this version');
}
