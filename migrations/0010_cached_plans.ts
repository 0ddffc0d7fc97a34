import { type Kysely, sql } from 'kysely';

/**
 * The statements a drain sends for every command, as plpgsql functions.
 *
 * The drain sends its statements as text in one simple query per round trip
 * (see src/drain/sql/queueHead.ts), and PostgreSQL plans a simple query's
 * statements afresh every time. On `commands`, with its many partial
 * indexes, planning cost more than running: pg_stat_statements'
 * track_planning showed the queue head, the last look and the settle
 * spending much of the drain's statement time in the planner. A plpgsql function plans each of its statements
 * once per connection and keeps the plan (a generic one once it is no
 * dearer than a custom one), so the call in the text is all that is planned.
 *
 * - slipway_queue_head: the object's next command (src/drain/sql/queueHead.ts
 *   says why in this order).
 * - slipway_queue_look: after the unlock, whether a command is ready and
 *   when the earliest yielded one will be.
 * - slipway_lock_object_row: the outcome transaction's row lock; returns the
 *   version it locked (null: no row).
 * - slipway_settle_command: one command's events, its supersessions and its
 *   own status (src/drain/sql/settleCommand.ts builds the call).
 *
 * Two more plans that were made on every call:
 * - slipway_wake_objects (every append and every drain commit with
 *   follow-ups) took a custom plan each time: the planner expects more
 *   rows from unnest of an unknown array than of the one-element array it
 *   is usually given, so the generic plan never looked as cheap. The
 *   generic plan is the same index lookups; it is forced.
 * - object_lock_key and object_drain_job_key, SQL functions meant to be
 *   inlined, were not: the first is STRICT around a CASE (which PostgreSQL
 *   cannot prove strict), the second IMMUTABLE around text || bigint (a
 *   STABLE operator). So each call was planned and run on its own. They
 *   return the same values written so they inline.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_queue_head(p_kind text, p_id bigint, p_preempting text[])
      returns setof commands language plpgsql stable
      as $fn$
      begin
        return query
          select * from commands c
          where c.target_kind = p_kind and c.target_id = p_id and c.status in ('queued', 'running')
            and (c.not_before <= now() or c.status = 'running')
          order by (c.status = 'running') desc, (c.kind = any(p_preempting)) desc, c.id
          limit 1;
      end
      $fn$;

    create function slipway_queue_look(p_kind text, p_id bigint, out ready boolean, out at timestamptz)
      language plpgsql stable
      as $fn$
      begin
        ready := exists (
          select 1 from commands c
          where c.target_kind = p_kind and c.target_id = p_id and c.status in ('queued', 'running')
            and (c.not_before <= now() or c.status = 'running'));
        at := (select min(c.not_before) from commands c
               where c.target_kind = p_kind and c.target_id = p_id and c.status = 'queued');
      end
      $fn$;

    create function slipway_lock_object_row(p_kind text, p_id bigint)
      returns int language plpgsql volatile
      as $fn$
      declare
        v_version int;
      begin
        case p_kind
          when 'lease' then select o.version into v_version from leases o where o.id = p_id for no key update;
          when 'resource' then select o.version into v_version from resources o where o.id = p_id for no key update;
          when 'blueprint' then select o.version into v_version from blueprints o where o.id = p_id for no key update;
        end case;
        return v_version;
      end
      $fn$;

    -- p_status 'yield' queues the command again until now() + p_retry_secs;
    -- any other status settles it. Events keep their array order.
    create function slipway_settle_command(
      p_id bigint, p_target_kind text, p_target_id bigint, p_status text, p_message text, p_retry_secs float8,
      p_events jsonb, p_supersedes text[], p_supersede_message text
    ) returns void language plpgsql volatile
      as $fn$
      begin
        if jsonb_array_length(p_events) > 0 then
          insert into events (target_kind, target_id, command_id, type, from_state, to_state, message, actor, source, data)
          select e.doc->>'target_kind', (e.doc->>'target_id')::bigint, (e.doc->>'command_id')::bigint, e.doc->>'type',
                 e.doc->>'from_state', e.doc->>'to_state', e.doc->>'message', e.doc->>'actor', e.doc->>'source',
                 nullif(e.doc->'data', 'null'::jsonb)
          from jsonb_array_elements(p_events) with ordinality as e(doc, n)
          order by e.n;
        end if;
        if cardinality(p_supersedes) > 0 then
          update commands set status = 'cancelled', finished_at = now(), message = p_supersede_message
          where target_kind = p_target_kind and target_id = p_target_id
            and status = 'queued' and kind = any(p_supersedes) and id <> p_id;
        end if;
        if p_status = 'yield' then
          update commands set status = 'queued', message = p_message, attempts = attempts + 1,
                              not_before = now() + make_interval(secs => p_retry_secs)
          where id = p_id;
        else
          update commands set status = p_status, message = p_message, finished_at = now(),
                              started_at = coalesce(started_at, now())
          where id = p_id;
        end if;
      end
      $fn$;

    alter function slipway_wake_objects(text[], text[], bigint[], timestamptz[]) set plan_cache_mode = force_generic_plan;

    create or replace function object_lock_key(kind text, id bigint) returns bigint
      language sql immutable called on null input parallel safe
      as $fn$
        select (x'534c'::bigint << 48)
             | ((case kind when 'blueprint' then 1 when 'resource' then 2 when 'lease' then 3 end)::bigint << 40)
             | id
      $fn$;

    create or replace function object_drain_job_key(kind text, id bigint) returns text
      language sql immutable strict parallel safe
      as $fn$ select 'drain:' || kind || ':' || id::text $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    create or replace function object_drain_job_key(kind text, id bigint) returns text
      language sql immutable strict parallel safe
      as $fn$ select 'drain:' || kind || ':' || id $fn$;
    create or replace function object_lock_key(kind text, id bigint) returns bigint
      language sql immutable strict parallel safe
      as $fn$
        select (x'534c'::bigint << 48)
             | ((case kind when 'blueprint' then 1 when 'resource' then 2 when 'lease' then 3 end)::bigint << 40)
             | id
      $fn$;
    alter function slipway_wake_objects(text[], text[], bigint[], timestamptz[]) reset plan_cache_mode;
    drop function slipway_settle_command(bigint, text, bigint, text, text, float8, jsonb, text[], text);
    drop function slipway_lock_object_row(text, bigint);
    drop function slipway_queue_look(text, bigint);
    drop function slipway_queue_head(text, bigint, text[]);
  `.execute(db);
}
