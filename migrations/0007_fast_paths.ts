import { type Kysely, sql } from 'kysely';

/**
 * The hot paths as server-side functions, so that each costs one round trip:
 *
 * - slipway_wake_objects: the wake-up of a set of objects (see
 *   src/queue/wakeObjects.ts for why it is shaped as it is).
 * - slipway_append_command: the admission check, the dedup-aware insert and
 *   the wake-up of one append (see src/queue/appendCommand.ts, the only
 *   caller; validation of kind, version and payload stays in TypeScript).
 *
 * Both are plpgsql, so each statement inside takes a fresh snapshot: the
 * dedup loop can see a colliding command that committed after it started.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_wake_objects(tasks text[], kinds text[], ids bigint[], run_ats timestamptz[])
      returns void language plpgsql volatile
      as $fn$
      declare
        t record;
      begin
        for t in
          with wanted as (
            select u.task, u.id, object_drain_job_key(u.kind, u.id) as job_key, min(coalesce(u.run_at, now())) as run_at
            from unnest(tasks, kinds, ids, run_ats) as u(task, kind, id, run_at)
            group by u.task, u.kind, u.id
          ),
          already_due as (
            select j.key from graphile_worker._private_jobs j
            join wanted w on j.key = w.job_key
            where j.is_available and j.run_at <= w.run_at
            order by j.key
            for share of j
          )
          select w.task, w.id, w.job_key, w.run_at from wanted w
          where w.job_key not in (select d.key from already_due d)
          order by w.job_key
        loop
          perform graphile_worker.add_job(
            identifier := t.task,
            payload := json_build_object('id', t.id),
            run_at := t.run_at,
            job_key := t.job_key
          );
        end loop;
      end
      $fn$;

    -- One append: returns one row ('inserted' or 'rejected' or 'missing'), or
    -- two when the command joined one already in flight ('coalesced_into',
    -- the command doing the work, then 'coalesced', this request's record).
    -- accepted_states null skips the admission check (messages between
    -- objects); wake_task null skips the wake-up (the caller wakes later).
    create function slipway_append_command(
      p_target_kind text, p_target_id bigint, p_accepted_states text[],
      p_kind text, p_version int, p_payload jsonb,
      p_issued_by text, p_source text, p_reason text, p_request_id text,
      p_client_address text, p_user_agent text,
      p_caused_by bigint, p_dedup_key text, p_not_before timestamptz, p_wake_task text
    ) returns table (part text, object_state text, cmd commands)
      language plpgsql volatile
      as $fn$
      declare
        v_state text;
        v_new commands;
        v_existing commands;
      begin
        if p_accepted_states is not null then
          -- FOR SHARE: a drain locks the row before it commits a state
          -- change (see lockObjectRow), so the state read here stays the
          -- state until this append commits.
          case p_target_kind
            when 'lease' then select o.state into v_state from leases o where o.id = p_target_id for share;
            when 'resource' then select o.state into v_state from resources o where o.id = p_target_id for share;
            else select o.state into v_state from blueprints o where o.id = p_target_id for share;
          end case;
          if v_state is null then
            return query select 'missing'::text, null::text, null::commands;
            return;
          end if;
          if not (v_state = any(p_accepted_states)) then
            return query select 'rejected'::text, v_state, null::commands;
            return;
          end if;
        end if;
        -- Loop: the in-flight command we collided with may settle before we
        -- read it, in which case our insert goes through on the next try.
        loop
          insert into commands (target_kind, target_id, kind, version, payload, issued_by, source, reason,
                                request_id, client_address, user_agent, caused_by, dedup_key, not_before)
          values (p_target_kind, p_target_id, p_kind, p_version, p_payload, p_issued_by, p_source, p_reason,
                  p_request_id, p_client_address, p_user_agent, p_caused_by, p_dedup_key, coalesce(p_not_before, now()))
          on conflict (target_kind, target_id, dedup_key)
            where dedup_key is not null and status in ('queued', 'running')
            do nothing
          returning * into v_new;
          if found then
            if p_wake_task is not null then
              perform slipway_wake_objects(array[p_wake_task], array[p_target_kind], array[p_target_id], array[p_not_before]);
            end if;
            return query select 'inserted'::text, v_state, v_new;
            return;
          end if;
          select * into v_existing from commands c
          where c.target_kind = p_target_kind and c.target_id = p_target_id
            and c.dedup_key = p_dedup_key and c.status in ('queued', 'running');
          if found then
            insert into commands (target_kind, target_id, kind, version, payload, issued_by, source, reason,
                                  request_id, client_address, user_agent, caused_by, dedup_key, not_before,
                                  status, coalesced_into, message, finished_at)
            values (p_target_kind, p_target_id, p_kind, p_version, p_payload, p_issued_by, p_source, p_reason,
                    p_request_id, p_client_address, p_user_agent, p_caused_by, null, coalesce(p_not_before, now()),
                    'coalesced', v_existing.id,
                    format('coalesced into command %s, already %s', v_existing.id, v_existing.status), now())
            returning * into v_new;
            return query select 'coalesced_into'::text, v_state, v_existing
                         union all select 'coalesced'::text, v_state, v_new;
            return;
          end if;
        end loop;
      end
      $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop function slipway_append_command(text, bigint, text[], text, int, jsonb, text, text, text, text, text, text, bigint, text, timestamptz, text);
    drop function slipway_wake_objects(text[], text[], bigint[], timestamptz[]);
  `.execute(db);
}
