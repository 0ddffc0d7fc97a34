/**
 * Raises `message` with `sqlstate` unless `ok`: the drain's checks inside
 * one simple query (SW001 version conflict, SW002 missing follow-up target).
 */
export const definition = `CREATE OR REPLACE FUNCTION public.slipway_expect(ok boolean, sqlstate text, message text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
      begin
        if ok is not true then
          raise exception using errcode = sqlstate, message = message;
        end if;
        return true;
      end
      $function$`;
