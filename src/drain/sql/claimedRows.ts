import { CompiledQuery } from 'kysely';

/**
 * The ids of the objects of one kind that the claim before it in the
 * transaction locked (slipway.claimed_<kind>, set by slipway_drain_claim).
 * None outside such a transaction: a setting never set reads as null, and
 * one set in an earlier transaction of the session as ''.
 */
const claimed = (kind: string) => `any(coalesce(nullif(current_setting('slipway.claimed_${kind}', true), ''), '{}')::bigint[])`;

/**
 * The rows of the objects the claim just before them in their transaction
 * locked, and their blueprints, as three statements (leases, resources,
 * blueprints) sent in the claim's round trip (slipway_drain_claim,
 * migrations/0029_claimed_rows.ts, names them in settings local to the
 * transaction). Each takes its own snapshot, after the claim's locks.
 * Read once per lock hold: only the holder writes an object's row, and the
 * drain carries it forward from each commit's RETURNING.
 */
export function claimedRowsStatements(): CompiledQuery[] {
  return [
    CompiledQuery.raw(`select * from leases where id = ${claimed('lease')}`, []),
    CompiledQuery.raw(`select * from resources where id = ${claimed('resource')}`, []),
    CompiledQuery.raw(
      `select * from blueprints where id = ${claimed('blueprint')}
         or id in (select blueprint_id from leases where id = ${claimed('lease')})
         or id in (select blueprint_id from resources where id = ${claimed('resource')})`,
      [],
    ),
  ];
}
