import { type Kysely, sql } from 'kysely';

/**
 * slipway_append_within: slipway_append_command behind the API's per-object
 * queue-depth limit, in the same statement. The API's answer to a release
 * then costs one statement, which needs no explicit transaction (src/api/
 * respond.ts), instead of begin, count, append and commit: four round trips.
 *
 * It answers 'busy' (and writes nothing) when the object already has
 * p_queue_limit commands queued or running, before the state check and the
 * dedup, like the check it replaces: a full queue refuses a duplicate too.
 * Everything else is slipway_append_command's (migrations/0007_fast_paths.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_append_within(
      p_queue_limit int,
      p_target_kind text, p_target_id bigint, p_accepted_states text[],
      p_kind text, p_version int, p_payload jsonb,
      p_issued_by text, p_source text, p_reason text, p_request_id text,
      p_client_address text, p_user_agent text,
      p_caused_by bigint, p_dedup_key text, p_not_before timestamptz, p_wake_task text
    ) returns table (part text, object_state text, cmd commands)
      language plpgsql volatile
      as $fn$
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
      $fn$
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop function slipway_append_within(int, text, bigint, text[], text, int, jsonb, text, text, text, text, text, text, bigint, text, timestamptz, text)
  `.execute(db);
}
