import { type Kysely, sql } from 'kysely';

/**
 * The set-based forms of the drain's statements, for a worker that drains
 * many objects of one kind on one connection (src/drain/DrainBatcher.ts).
 * PostgreSQL's cost in the drain is per statement (executor start-up, opening
 * a table and each of its indexes), not per row, so one statement for many
 * objects costs little more than one for one.
 *
 * - slipway_drain_next_many: slipway_drain_next (0012) for many objects of
 *   one kind: returns the next ready command of each object that has one
 *   (its lock kept), lets go of the others' locks, looks at their queues
 *   once more in a fresh snapshot after the unlocks (waking an object for
 *   anything found: at once if ready, else when the earliest is due), and
 *   sends `p_notices`. Unlike slipway_drain_next it sends the notices it is
 *   given whether or not a hold ended: a batch's commit is shared by many
 *   objects, so holding notices back until every hold in it ended would
 *   delay them for as long as the longest.
 * - slipway_drain_start_many: tries each object's lock, then is
 *   slipway_drain_next_many for those it got, without notices. The ids must
 *   be distinct and not already locked by the caller's session: session
 *   locks count, and a second lock would outlive the unlock.
 * - slipway_lock_object_versions: the row lock and version check of
 *   slipway_lock_object_version (0012) for many objects, taken in wake-up job
 *   key order, the order every batched append locks rows in
 *   (src/queue/AppendBatcher.ts), so the two never wait on each other in a
 *   cycle. SW001 names every object that moved. Leases and resources only:
 *   blueprints are never drained in batches (see DrainBatcher's BATCHED).
 * - slipway_settle_commands: slipway_settle_command (0010) for many commands:
 *   their events in order, the queued work each supersedes, and each one's
 *   status. The per-object drain calls it with one command, so one function
 *   settles every command; slipway_settle_command stays for the workers of
 *   the version before during a rolling upgrade.
 *
 * Each runs with plan_cache_mode = force_generic_plan: for a statement over
 * an array or a JSON document, a custom plan (planned for the values given)
 * always looks cheaper than the generic one (planned for 10 or 100 rows), so
 * PostgreSQL would plan it afresh on every call, and planning a statement on
 * commands or leases (many indexes each) costs more than running it. The
 * generic plans are the same index lookups.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_drain_next_many(p_kind text, p_ids bigint[], p_preempting text[], p_task text, p_channel text, p_notices jsonb)
      returns setof commands language plpgsql volatile
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        v_heads commands[];
        v_ended bigint[];
      begin
        v_heads := array(
          select h.cmd from unnest(p_ids) as i(id)
          cross join lateral (
            select c as cmd from commands c
            where c.target_kind = p_kind and c.target_id = i.id and c.status in ('queued', 'running')
              and (c.not_before <= now() or c.status = 'running')
            order by (c.status = 'running') desc, (c.kind = any(p_preempting)) desc, c.id
            limit 1
          ) as h
        );
        return query select * from unnest(v_heads);
        v_ended := array(select i.id from unnest(p_ids) as i(id)
                         where i.id <> all (select h.target_id from unnest(v_heads) as h));
        if cardinality(v_ended) > 0 then
          perform pg_advisory_unlock(object_lock_key(p_kind, e.id)) from unnest(v_ended) as e(id);
          perform slipway_wake_objects(array_agg(p_task), array_agg(p_kind), array_agg(d.id), array_agg(d.due))
          from (select c.target_id as id, min(c.not_before) as due from commands c
                where c.target_kind = p_kind and c.target_id = any(v_ended) and c.status in ('queued', 'running')
                group by c.target_id) as d
          having count(*) > 0;
        end if;
        if jsonb_array_length(p_notices) > 0 then
          perform set_config('synchronous_commit', 'off', true);
          perform pg_notify(p_channel, n) from jsonb_array_elements_text(p_notices) with ordinality as a(n, i) order by i;
        end if;
      end
      $fn$;

    create function slipway_drain_start_many(p_kind text, p_ids bigint[], p_preempting text[], p_task text)
      returns setof commands language plpgsql volatile
      set plan_cache_mode = force_generic_plan
      as $fn$
      begin
        return query select * from slipway_drain_next_many(
          p_kind,
          array(select i.id from unnest(p_ids) as i(id) where pg_try_advisory_lock(object_lock_key(p_kind, i.id))),
          p_preempting, p_task, '', '[]'::jsonb);
      end
      $fn$;

    create function slipway_lock_object_versions(p_kind text, p_ids bigint[], p_versions int[])
      returns void language plpgsql volatile
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        v_found bigint[];
        v_at int[];
        v_moved text;
      begin
        case p_kind
          when 'lease' then
            select array_agg(o.id), array_agg(o.version) into v_found, v_at
            from (select l.id, l.version from leases l where l.id = any(p_ids)
                  order by object_drain_job_key('lease', l.id) for no key update) as o;
          when 'resource' then
            select array_agg(o.id), array_agg(o.version) into v_found, v_at
            from (select r.id, r.version from resources r where r.id = any(p_ids)
                  order by object_drain_job_key('resource', r.id) for no key update) as o;
        end case;
        select string_agg(format('%s %s is at version %s, not %s', p_kind, w.id, coalesce(f.version::text, 'none (no row)'), w.version), '; ')
          into v_moved
        from unnest(p_ids, p_versions) as w(id, version)
        left join unnest(v_found, v_at) as f(id, version) on f.id = w.id
        where f.version is distinct from w.version;
        if v_moved is not null then
          raise exception using errcode = 'SW001', message = v_moved || ', under its drain';
        end if;
      end
      $fn$;

    create function slipway_settle_commands(p_settles jsonb, p_events jsonb)
      returns void language plpgsql volatile
      set plan_cache_mode = force_generic_plan
      as $fn$
      declare
        -- The ids as an array too, so the generic plan finds the commands
        -- by their key: joined only to the document, it may hash the table.
        v_ids bigint[] := array(select (s.doc->>'id')::bigint from jsonb_array_elements(p_settles) as s(doc));
      begin
        if jsonb_array_length(p_events) > 0 then
          insert into events (target_kind, target_id, command_id, type, from_state, to_state, message, actor, source, data)
          select e.doc->>'target_kind', (e.doc->>'target_id')::bigint, (e.doc->>'command_id')::bigint, e.doc->>'type',
                 e.doc->>'from_state', e.doc->>'to_state', e.doc->>'message', e.doc->>'actor', e.doc->>'source',
                 nullif(e.doc->'data', 'null'::jsonb)
          from jsonb_array_elements(p_events) with ordinality as e(doc, n)
          order by e.n;
        end if;
        update commands c set status = 'cancelled', finished_at = now(), message = s.supersede_message
        from jsonb_to_recordset(p_settles) as s(id bigint, target_kind text, target_id bigint, supersedes text[], supersede_message text)
        where cardinality(s.supersedes) > 0
          and c.target_kind = s.target_kind and c.target_id = s.target_id
          and c.status = 'queued' and c.kind = any(s.supersedes) and c.id <> s.id;
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
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop function slipway_settle_commands(jsonb, jsonb);
    drop function slipway_lock_object_versions(text, bigint[], int[]);
    drop function slipway_drain_start_many(text, bigint[], text[], text);
    drop function slipway_drain_next_many(text, bigint[], text[], text, text, jsonb);
  `.execute(db);
}
