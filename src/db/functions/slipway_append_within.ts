/**
 * slipway_append_command behind the API's per-object queue-depth limit, in
 * the same statement, so the API's release is one statement without an
 * explicit transaction.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_append_within(p_queue_limit integer, p_target_kind text, p_target_id bigint, p_accepted_states text[], p_kind text, p_version integer, p_payload jsonb, p_issued_by text, p_source text, p_reason text, p_request_id text, p_client_address text, p_user_agent text, p_caused_by bigint, p_dedup_key text, p_not_before timestamp with time zone, p_wake_task text)
 RETURNS TABLE(part text, object_state text, cmd public.commands)
 LANGUAGE plpgsql
AS $function$
      begin
        if (select count(*) from (
              select 1 from commands c
              where c.target_kind = p_target_kind and c.target_id = p_target_id and c.status in ('queued', 'running')
              limit p_queue_limit) as queue) >= p_queue_limit then
          return query select 'busy'::text, null::text, null::commands;
          return;
        end if;
        return query select * from slipway_append_command(
          p_target_kind, p_target_id, p_accepted_states, p_kind, p_version, p_payload,
          p_issued_by, p_source, p_reason, p_request_id, p_client_address, p_user_agent,
          p_caused_by, p_dedup_key, p_not_before, p_wake_task);
      end
      $function$`;
