/**
 * The key of an object's advisory lock: Slipway's tag ('SL') in the top 16
 * bits and the object kind below it, so its keys meet no one else's and two
 * kinds never meet. Not STRICT, so the planner can inline it.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.object_lock_key(kind text, id bigint)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
        select (x'534c'::bigint << 48)
             | ((case kind when 'blueprint' then 1 when 'resource' then 2 when 'lease' then 3 end)::bigint << 40)
             | id
      $function$`;
