/**
 * Queues one deliver_callback job (src/tasks/deliverCallback.ts) per pending
 * callback not yet queued, skipping rows another dispatcher holds
 * (src/callbacks/dispatchCallbacks.ts).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_dispatch_callbacks()
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
      declare
        v record;
        v_queued integer := 0;
      begin
        for v in
          update command_callbacks c set job_queued = true
          where c.id in (
            select d.id from command_callbacks d
            where d.status = 'pending' and not d.job_queued
            order by d.id
            for update skip locked
          )
          returning c.id, c.next_attempt_at
        loop
          perform graphile_worker.add_job(
            identifier := 'deliver_callback',
            payload := json_build_object('id', v.id),
            run_at := v.next_attempt_at,
            job_key := 'callback:' || v.id
          );
          v_queued := v_queued + 1;
        end loop;
        return v_queued;
      end
      $function$`;
