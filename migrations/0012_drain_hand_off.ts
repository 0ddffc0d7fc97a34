import { type Kysely, sql } from 'kysely';

/**
 * A lock hold that starts and ends inside the drain's other round trips
 * (src/drain/sql/queueHead.ts), so that a pending lease's release costs the
 * drain three round trips instead of four and no empty transactions:
 *
 * - slipway_drain_next, sent after each outcome's commit: the object's next
 *   ready command, the advisory lock kept; or, when there is none, it lets
 *   go of the lock, sends the notices the drain held, and looks at the queue
 *   once more, in a fresh snapshot after the unlock (a volatile function's
 *   every statement takes one): a command that committed before the unlock
 *   is then always seen, and the object is woken for it (at once if it is
 *   ready: its own wake-up may have found the lock taken; else when the
 *   earliest yielded command is due). It returns no row then.
 *   The notices' transaction commits asynchronously: NOTIFY needs a
 *   transaction id, and waiting for its flush would serialise every drain's
 *   hold on the WAL. A wake-up lost with it in a server crash is made good
 *   by the sweeper, which wakes any object whose commands are overdue.
 * - slipway_drain_start: tries the lock and, when it got it, is
 *   slipway_drain_next without notices; no row: not locked, or nothing ready
 *   (and the lock given back).
 * - slipway_lock_object_version: the object's row lock, taken first in each
 *   outcome transaction (see src/drain/sql/objectRow.ts), failing with
 *   SW001 unless the row is still at the version the drain carries, so the
 *   check travels in the same round trip as the outcome it guards.
 *
 * slipway_lock_object (0009) and slipway_queue_look (0010) are no longer
 * called by this version. They stay for the workers of the version before,
 * which go on draining during a rolling upgrade until they are restarted; a
 * later migration may drop them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_drain_next(p_kind text, p_id bigint, p_preempting text[], p_task text, p_channel text, p_notices jsonb)
      returns setof commands language plpgsql volatile
      as $fn$
      declare
        v_due timestamptz;
      begin
        return query select * from slipway_queue_head(p_kind, p_id, p_preempting);
        if found then
          return;
        end if;
        perform pg_advisory_unlock(object_lock_key(p_kind, p_id));
        v_due := (select min(c.not_before) from commands c
                  where c.target_kind = p_kind and c.target_id = p_id and c.status in ('queued', 'running'));
        if v_due is not null then
          perform slipway_wake_objects(array[p_task], array[p_kind], array[p_id], array[v_due]);
        end if;
        if jsonb_array_length(p_notices) > 0 then
          perform set_config('synchronous_commit', 'off', true);
          perform pg_notify(p_channel, n) from jsonb_array_elements_text(p_notices) with ordinality as a(n, i) order by i;
        end if;
      end
      $fn$;

    create function slipway_drain_start(p_kind text, p_id bigint, p_preempting text[], p_task text)
      returns setof commands language plpgsql volatile
      as $fn$
      begin
        if pg_try_advisory_lock(object_lock_key(p_kind, p_id)) then
          return query select * from slipway_drain_next(p_kind, p_id, p_preempting, p_task, '', '[]'::jsonb);
        end if;
      end
      $fn$;

    create function slipway_lock_object_version(p_kind text, p_id bigint, p_version int)
      returns void language plpgsql volatile
      as $fn$
      declare
        v_version int := slipway_lock_object_row(p_kind, p_id);
      begin
        if v_version is null then
          raise exception using errcode = 'SW001', message = format('%s %s has no row', p_kind, p_id);
        elsif v_version <> p_version then
          raise exception using errcode = 'SW001',
            message = format('%s %s is at version %s, not %s, under its drain', p_kind, p_id, v_version, p_version);
        end if;
      end
      $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    drop function slipway_lock_object_version(text, bigint, int);
    drop function slipway_drain_start(text, bigint, text[], text);
    drop function slipway_drain_next(text, bigint, text[], text, text, jsonb);
  `.execute(db);
}
