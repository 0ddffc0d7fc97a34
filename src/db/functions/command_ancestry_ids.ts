/**
 * The ids of a command and of every command that caused it, up to the root:
 * a settled command's callbacks are those of its tree, registered on any
 * command of it.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.command_ancestry_ids(leaf bigint)
 RETURNS SETOF bigint
 LANGUAGE sql
 STABLE STRICT
AS $function$
        with recursive up (id, caused_by) as (
          select id, caused_by from commands where id = leaf
          union all
          select c.id, c.caused_by from commands c join up on c.id = up.caused_by
        )
        select id from up
      $function$`;
