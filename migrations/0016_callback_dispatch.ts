import { type Kysely, sql } from 'kysely';

/**
 * Callback deliveries leave Slipway's durable transactions. Until now the
 * trigger that finds a settled tree, and every retry, queued the delivery
 * job with graphile_worker.add_job inside the drain's or the API's durable
 * commit, and add_job sends a NOTIFY: PostgreSQL holds a database-wide lock
 * from a notifying commit through its WAL flush, so those commits lined up.
 *
 * Now queue_callback_delivery (same signature, same callers) only records
 * in the durable transaction that the delivery is due: status 'pending',
 * next_attempt_at, and job_queued false. slipway_dispatch_callbacks, run
 * after the commit in an asynchronously committed transaction of its own
 * (the drain's step, an append's after-commit hook, a delivery's retry, and
 * every sweeper pass as the backstop), queues the graphile-worker job and
 * sets job_queued in that same transaction: if that transaction is lost in
 * a crash, so is the mark, and the next dispatch queues the job again.
 * SKIP LOCKED keeps two dispatchers from waiting on each other; the job key
 * ('callback:<id>', as before) keeps one job per callback.
 *
 * Callbacks already pending have their job: the new column's default marks
 * them queued.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    alter table command_callbacks add column job_queued boolean not null default true;
    create index command_callbacks_to_dispatch on command_callbacks (id) where status = 'pending' and not job_queued;

    create or replace function queue_callback_delivery(callback_id bigint, run_at timestamptz default now()) returns void
      language sql
      as $fn$
        update command_callbacks set status = 'pending', next_attempt_at = run_at, job_queued = false where id = callback_id
      $fn$;

    create function slipway_dispatch_callbacks() returns integer
      language plpgsql
      as $fn$
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
      $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    select slipway_dispatch_callbacks();
    drop function slipway_dispatch_callbacks();
    create or replace function queue_callback_delivery(callback_id bigint, run_at timestamptz default now()) returns void
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
    drop index command_callbacks_to_dispatch;
    alter table command_callbacks drop column job_queued;
  `.execute(db);
}
