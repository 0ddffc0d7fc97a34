import { type Kysely, sql } from 'kysely';

/**
 * Callbacks: a URL to POST a command's final status to once the command and
 * every command it caused have settled, and the log of delivery attempts.
 *
 * The delivery is queued by a trigger on `commands`, so neither the drain nor
 * the append path needs to know callbacks exist: a settlement with no
 * callback waiting anywhere costs one probe of a small partial index.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table command_callbacks (
      id bigint generated always as identity primary key,
      command_id bigint not null references commands (id) on delete cascade,
      url text not null,
      -- waiting: the command's tree has not settled; pending: a delivery job
      -- is queued (first try or a retry); delivered / failed: final
      status text not null default 'waiting'
        check (status in ('waiting', 'pending', 'delivered', 'failed')),
      attempts int not null default 0,
      next_attempt_at timestamptz,
      created_at timestamptz not null default now(),
      finished_at timestamptz,
      unique (command_id, url)
    );
    create index command_callbacks_waiting on command_callbacks (command_id) where status = 'waiting';

    create table callback_attempts (
      id bigint generated always as identity primary key,
      callback_id bigint not null references command_callbacks (id) on delete cascade,
      attempt int not null check (attempt > 0),
      started_at timestamptz not null,
      finished_at timestamptz not null default now(),
      -- the receiver's HTTP status, or null when no response came (see error)
      status_code int,
      error text,
      -- when the next attempt is due; null after a success or the last attempt
      next_retry_at timestamptz,
      unique (callback_id, attempt)
    );

    -- A command and every command it caused (following caused_by down).
    create function command_tree_ids(root bigint) returns setof bigint
      language sql stable strict
      as $fn$
        with recursive tree (id) as (
          select root
          union all
          select c.id from commands c join tree on c.caused_by = tree.id
        )
        select id from tree
      $fn$;

    -- A command and every command that led to it (following caused_by up).
    create function command_ancestry_ids(leaf bigint) returns setof bigint
      language sql stable strict
      as $fn$
        with recursive up (id, caused_by) as (
          select id, caused_by from commands where id = leaf
          union all
          select c.id, c.caused_by from commands c join up on c.id = up.caused_by
        )
        select id from up
      $fn$;

    -- Marks a callback due at run_at and queues its delivery job there: the
    -- one definition of the task name and job key (one job per callback),
    -- for the first attempt (trigger, attachCallback) and for retries.
    create function queue_callback_delivery(callback_id bigint, run_at timestamptz default now()) returns void
      language plpgsql
      as $fn$
      begin
        update command_callbacks set status = 'pending', next_attempt_at = run_at where id = callback_id;
        perform graphile_worker.add_job(
          identifier := 'deliver_callback',
          payload := json_build_object('id', callback_id),
          run_at := run_at,
          job_key := 'callback:' || callback_id
        );
      end
      $fn$;

    -- Queues the delivery of every waiting callback whose command's tree the
    -- settled command completes. The callback rows are locked before the tree
    -- is read, and each statement here reads a fresh snapshot: of two drains
    -- settling the last two commands of one tree at once, the second to take
    -- the lock sees the first's commit, so exactly one of them queues it.
    create function queue_settled_callbacks() returns trigger
      language plpgsql
      as $fn$
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
      $fn$;

    -- Deferred to the commit: a drain settles a command before it appends
    -- the follow-ups that join its tree, in the same transaction, and the
    -- tree is only complete once they are in.
    create constraint trigger commands_queue_settled_callbacks
      after update of status on commands
      deferrable initially deferred
      for each row
      when (old.status in ('queued', 'running') and new.status not in ('queued', 'running'))
      execute function queue_settled_callbacks();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop trigger commands_queue_settled_callbacks on commands;
    drop function queue_settled_callbacks();
    drop function queue_callback_delivery(bigint, timestamptz);
    drop function command_ancestry_ids(bigint);
    drop function command_tree_ids(bigint);
    drop table callback_attempts, command_callbacks;
  `.execute(db);
}
