/**
 * The one way a command is queued: the admission check against the target's
 * state and queue, the dedup-aware insert and the object's wake-up
 * (src/queue/appendCommand.ts validates kind, version and payload first).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_append_command(p_target_kind text, p_target_id bigint, p_accepted_states text[], p_kind text, p_version integer, p_payload jsonb, p_issued_by text, p_source text, p_reason text, p_request_id text, p_client_address text, p_user_agent text, p_caused_by bigint, p_dedup_key text, p_not_before timestamp with time zone, p_wake_task text)
 RETURNS TABLE(part text, object_state text, cmd public.commands)
 LANGUAGE plpgsql
AS $function$
      declare
        v_state text;
        v_new commands;
        v_existing commands;
      begin
        if p_accepted_states is not null then
          -- FOR SHARE: a drain locks the row before it commits a state
          -- change (src/drain/sql/lockVersions.ts), so the state read here
          -- stays the state until this append commits.
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
            -- slipway_wake_objects for one object (see above).
            if p_wake_task is not null then
              insert into drain_wakeups as w (target_kind, target_id, run_at)
              values (p_target_kind, p_target_id, coalesce(p_not_before, now()))
              on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
            end if;
            return query select 'inserted'::text, v_state, v_new;
            return;
          end if;
          select * into v_existing from commands c
          where c.target_kind = p_target_kind and c.target_id = p_target_id
            and c.dedup_key = p_dedup_key and c.status in ('queued', 'running');
          if found then
            -- Asked for sooner than it is queued for: it runs at the sooner time.
            if v_existing.status = 'queued' and v_existing.not_before > coalesce(p_not_before, now()) then
              update commands c set not_before = coalesce(p_not_before, now())
              where c.id = v_existing.id and c.status = 'queued';
              if p_wake_task is not null then
                insert into drain_wakeups as w (target_kind, target_id, run_at)
                values (p_target_kind, p_target_id, coalesce(p_not_before, now()))
                on conflict (target_kind, target_id) do update set run_at = excluded.run_at where w.run_at > excluded.run_at;
              end if;
            end if;
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
      $function$`;
