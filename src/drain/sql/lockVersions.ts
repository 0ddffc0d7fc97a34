import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../db/objectTables.ts';
import { VERSION_CONFLICT_SQLSTATE } from '../commitOutcome.ts';

/**
 * The first statement of every step's transaction: locks the rows of the
 * step's objects (blueprints, then resources, then leases, each by id) and
 * fails with SW001 unless each is still at the version the drain carries.
 *
 * Why lock rows only we write: callers appending from outside read the
 * object's state FOR SHARE (slipway_append_command), so this lock orders
 * every state change against every admission check: an append either
 * commits before the change (a duplicate release joins the one in flight)
 * or reads the state after it (and is refused). FOR NO KEY UPDATE, not FOR
 * UPDATE: new leases and resources key-share their blueprint's row, and
 * must not queue behind its drain. First: the decisions may then lock other
 * rows (a resource reads its blueprint's row FOR SHARE), and taking our own
 * before any of those keeps a waiting append out of any cycle of waits.
 */
export function lockVersionsStatement(objects: ReadonlyArray<ObjectRef & { version: number }>): CompiledQuery {
  const ids = (kind: ObjectRef['kind']) => objects.filter((o) => o.kind === kind).map((o) => o.id);
  return CompiledQuery.raw(
    `with b as (select id, version from blueprints where id = any($4::bigint[]) order by id for no key update),
          r as (select id, version from resources where id = any($5::bigint[]) order by id for no key update),
          l as (select id, version from leases where id = any($6::bigint[]) order by id for no key update),
          found as (
            select 'blueprint' as kind, id, version from b
            union all select 'resource', id, version from r
            union all select 'lease', id, version from l
          )
     select slipway_expect(m.moved is null, '${VERSION_CONFLICT_SQLSTATE}', m.moved || ', under its drain')
     from (
       select string_agg(format('%s %s is at version %s, not %s', w.kind, w.id, coalesce(f.version::text, 'none (no row)'), w.version), '; ') as moved
       from unnest($1::text[], $2::bigint[], $3::int[]) as w(kind, id, version)
       left join found f on f.kind = w.kind and f.id = w.id
       where f.version is distinct from w.version
     ) as m`,
    [objects.map((o) => o.kind), objects.map((o) => o.id), objects.map((o) => o.version), ids('blueprint'), ids('resource'), ids('lease')],
  );
}
