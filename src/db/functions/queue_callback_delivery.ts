/**
 * Marks a callback pending, due at run_at; slipway_dispatch_callbacks then
 * queues its job.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.queue_callback_delivery(callback_id bigint, run_at timestamp with time zone DEFAULT now())
 RETURNS void
 LANGUAGE sql
AS $function$
        update command_callbacks set status = 'pending', next_attempt_at = run_at, job_queued = false where id = callback_id
      $function$`;
