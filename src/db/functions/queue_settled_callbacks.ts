/**
 * Trigger function: when a command settles, queues the delivery of each
 * waiting callback whose whole tree has now settled, in the settling
 * transaction, so no settlement is missed.
 */
export const definition = `CREATE OR REPLACE FUNCTION public.queue_settled_callbacks()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
      declare
        waiting record;
      begin
        if not exists (select 1 from command_callbacks where status = 'waiting') then
          return null;
        end if;
        for waiting in
          select cb.id, cb.command_id from command_callbacks cb
          where cb.status = 'waiting' and cb.command_id in (select command_ancestry_ids(new.id))
          order by cb.id
          for update
        loop
          if not exists (
            select 1 from commands c
            where c.id in (select command_tree_ids(waiting.command_id)) and c.status in ('queued', 'running')
          ) then
            perform queue_callback_delivery(waiting.id);
          end if;
        end loop;
        return null;
      end
      $function$`;
