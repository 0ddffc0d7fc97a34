import { type Kysely, sql } from 'kysely';

/**
 * Two helpers that let the drain send more in one round trip.
 *
 * slipway_lock_object: tries the object's session advisory lock and, only if
 * it got it, locks the object's row in the caller's transaction too, so a
 * lock hold starts with its first outcome transaction already open (see
 * lockAndReadHead in src/drain/sql/queueHead.ts). A row lock taken without
 * the advisory lock would make the real holder wait.
 *
 * slipway_expect: raises `message` with `sqlstate` unless `ok`.
 *
 * The drain sends a command's whole outcome (settle, follow-ups, wake-ups)
 * and its commit in one simple query (see src/drain/sql/commitOutcome.ts),
 * so a check that must stop the commit cannot wait for the client to read a
 * result: it has to fail inside the query, which abandons the statements
 * after it, the commit included. Its own SQLSTATEs (class SW) let the drain
 * tell a broken version check from any other failure.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function slipway_lock_object(p_kind text, p_id bigint)
      returns boolean language plpgsql volatile
      as $fn$
      begin
        if not pg_try_advisory_lock(object_lock_key(p_kind, p_id)) then
          return false;
        end if;
        case p_kind
          when 'lease' then perform 1 from leases where id = p_id for no key update;
          when 'resource' then perform 1 from resources where id = p_id for no key update;
          when 'blueprint' then perform 1 from blueprints where id = p_id for no key update;
        end case;
        return true;
      end
      $fn$
  `.execute(db);
  await sql`
    create function slipway_expect(ok boolean, sqlstate text, message text)
      returns boolean language plpgsql volatile
      as $fn$
      begin
        if ok is not true then
          raise exception using errcode = sqlstate, message = message;
        end if;
        return true;
      end
      $fn$
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function slipway_expect(boolean, text, text)`.execute(db);
  await sql`drop function slipway_lock_object(text, bigint)`.execute(db);
}
