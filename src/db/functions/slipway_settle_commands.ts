/**
 * Settles a step's commands: their events in order, the queued work each
 * supersedes, and each one's status (src/drain/sql/settleCommand.ts).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_settle_commands(p_settles jsonb, p_events jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
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
      $function$`;
