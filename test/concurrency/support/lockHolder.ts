import { sql } from 'kysely';
import type { ObjectKind } from '../../../migrations/schema.ts';
import type { Db } from '../../../src/db/Database.ts';

/**
 * The application_name of the connection holding an object's drain lock in
 * this database, if any: which worker process is draining it right now.
 */
export async function lockHolder(db: Db, kind: ObjectKind, id: number): Promise<string | undefined> {
  const { rows } = await sql<{ name: string }>`
    select a.application_name as name
    from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = (object_lock_key(${kind}, ${id}) >> 32)::oid
      and l.objid = (object_lock_key(${kind}, ${id}) & 4294967295)::oid
  `.execute(db);
  return rows[0]?.name;
}

/**
 * How many connections of this database hold drain locks right now: each
 * lane holds its objects' locks on a connection of its own. A drain lock's
 * key carries object_lock_key's prefix in its top 16 bits, whatever the
 * object (asked of the function, not copied here).
 */
export async function drainingConnections(db: Db): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(distinct l.pid)::int as n from pg_locks l
    where l.locktype = 'advisory' and l.granted and l.objsubid = 1
      and l.database = (select oid from pg_database where datname = current_database())
      and (l.classid::bigint >> 16) = (object_lock_key('lease', 0) >> 48)
  `.execute(db);
  return rows[0]!.n;
}
