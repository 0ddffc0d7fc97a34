/**
 * The ids of a command and of every command it caused, at any depth: what
 * `wait` and a callback wait for to settle.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.command_tree_ids(root bigint)
 RETURNS SETOF bigint
 LANGUAGE sql
 STABLE STRICT
AS $function$
        with recursive tree (id) as (
          select root
          union all
          select c.id from commands c join tree on c.caused_by = tree.id
        )
        select id from tree
      $function$`;
