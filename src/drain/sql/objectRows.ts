import { CompiledQuery } from 'kysely';
import type { ObjectRef } from '../../db/objectTables.ts';

const idsOf = (refs: readonly ObjectRef[], kind: ObjectRef['kind']) => refs.filter((r) => r.kind === kind).map((r) => r.id);

/**
 * The rows of objects a drain has just locked, and their blueprints, as three
 * statements (leases, resources, blueprints) for one round trip. Read once
 * per lock hold: only the holder writes an object's row, and the drain
 * carries it forward from each commit's RETURNING.
 */
export function objectRowsStatements(refs: readonly ObjectRef[]): CompiledQuery[] {
  const leases = idsOf(refs, 'lease');
  const resources = idsOf(refs, 'resource');
  const blueprints = idsOf(refs, 'blueprint');
  return [
    CompiledQuery.raw('select * from leases where id = any($1::bigint[])', [leases]),
    CompiledQuery.raw('select * from resources where id = any($1::bigint[])', [resources]),
    CompiledQuery.raw(
      `select * from blueprints where id = any($1::bigint[])
         or id in (select blueprint_id from leases where id = any($2::bigint[]))
         or id in (select blueprint_id from resources where id = any($3::bigint[]))`,
      [blueprints, leases, resources],
    ),
  ];
}
