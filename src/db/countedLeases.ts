import { sql } from 'kysely';
import { compiledOnce } from './compiledOnce.ts';
import type { Db } from './Database.ts';
import { type Counted, covers, type Quota, quotaReached } from '../domain/quotas.ts';
import { perStep } from './perStep.ts';

/**
 * The leases a quota and a team's share count: those holding a slot (a
 * resource_slots row, from the resource's acquire until the resource has
 * the slot back) and those a blueprint has sent to a resource whose
 * `acquire` is still queued. So a lease counts from the decision that
 * serves it, not from its grant, which comes later in another object's
 * drain: a decision never serves more than a quota allows by not yet
 * seeing what the decisions before it served. The acquires sent by this
 * step's own decisions, which its commit has not written yet, are counted
 * from `promisedInStep`.
 *
 * Counted per blueprint by its resources (as many as it has); overall, for
 * the teams given, by every slot held (as many as leases are held) and
 * every acquire on its way (commands_acquires_in_flight).
 *
 * Each lease once (`count(distinct …)`), whatever order a transaction's
 * decisions run in: one that has taken a lease's slot (as an acquire
 * decides) sees the slot row while the acquire is still queued, marked done
 * only as it commits. Counted twice, a lease would make its team look the
 * heavier user, and the teams served most would lose slots to the others.
 */
export async function countedAtBlueprint(trx: Db, blueprintId: number): Promise<Counted[]> {
  const { rows } = await sql<Counted>`
    select l.team, l.holder, r.blueprint_id as "blueprintId", count(distinct counted.lease_id)::int as n
    from resources r
    join lateral (
      select s.lease_id from resource_slots s where s.resource_id = r.id and s.lease_id is not null
      union all
      select (c.payload->>'leaseId')::bigint from commands c
      where c.target_kind = 'resource' and c.target_id = r.id and c.kind = 'acquire' and c.status in ('queued', 'running')
    ) counted on true
    join leases l on l.id = counted.lease_id
    where r.blueprint_id = ${blueprintId}
    group by 1, 2, 3
  `.execute(trx);
  return [...rows, ...promisedInStep(trx).filter((p) => p.blueprintId === blueprintId)];
}

/** The leases counted for `teams` at every blueprint (for their overall quotas). */
export async function countedOverall(trx: Db, teams: readonly string[]): Promise<Counted[]> {
  const { rows } = await sql<Counted>`
    select l.team, l.holder, counted.blueprint_id as "blueprintId", count(distinct counted.lease_id)::int as n
    from (
      select s.lease_id, r.blueprint_id from resource_slots s join resources r on r.id = s.resource_id where s.lease_id is not null
      union all
      select (c.payload->>'leaseId')::bigint, r.blueprint_id from commands c join resources r on r.id = c.target_id
      where c.target_kind = 'resource' and c.kind = 'acquire' and c.status in ('queued', 'running')
    ) counted
    join leases l on l.id = counted.lease_id
    where l.team = any(${[...teams]}::text[])
    group by 1, 2, 3
  `.execute(trx);
  const wanted = new Set(teams);
  return [...rows, ...promisedInStep(trx).filter((p) => wanted.has(p.team))];
}

/** Counts a lease this step's decision has just sent to a resource, until the step commits the acquire. */
export function countPromised(trx: Db, lease: { team: string; holder: string; blueprintId: number }): void {
  promisedInStep(trx).push({ ...lease, n: 1 });
}

const promisedInStep = perStep((): Counted[] => []);

/**
 * The quotas that may cover leases at `blueprintId`: its own, and every
 * overall one. The overall ones are locked first, all of them in one order:
 * two blueprints serving the same team at once would otherwise each count
 * the other's leases as not yet sent, and together exceed an overall quota
 * (a blueprint's own quotas need no lock: its decisions are serialized by
 * its row). Locked only while an overall quota exists; they are few, and
 * only blueprint decisions that serve someone take them.
 */
export async function quotasFor(trx: Db, blueprintId: number): Promise<Quota[]> {
  const quotas = await readQuotas(trx, blueprintId);
  if (quotas.some((q) => q.blueprintId === null) && !overallLocked(trx).locked) {
    await trx.selectFrom('quotas').select('id').where('blueprint_id', 'is', null).orderBy('id').forUpdate().execute();
    overallLocked(trx).locked = true;
  }
  return quotas;
}

const overallLocked = perStep(() => ({ locked: false }));

/** Read at every request for a slot: compiled once. */
const readQuotasQuery = compiledOnce(
  (db, blueprintId: number) =>
    db
      .selectFrom('quotas')
      .select(['id', 'team', 'holder', 'blueprint_id', 'max_leases'])
      .where((eb) => eb.or([eb('blueprint_id', '=', blueprintId), eb('blueprint_id', 'is', null)]))
      .orderBy('id'),
  0,
);

/** The quotas that may cover leases at `blueprintId`, unlocked (for a request's look ahead, see quotaReachedNow). */
async function readQuotas(trx: Db, blueprintId: number): Promise<Quota[]> {
  const { rows } = await trx.executeQuery(readQuotasQuery(blueprintId));
  return rows.map((q) => ({ team: q.team, holder: q.holder, blueprintId: q.blueprint_id, maxLeases: q.max_leases }));
}

/**
 * The quota a new lease of `team` and `holder` at `blueprintId` would
 * exceed now, with its count: what a request that asks not to wait
 * (`queue: false`) is refused for. A look, not a reservation: the
 * blueprint's decision counts again when it serves the lease.
 */
export async function quotaReachedNow(db: Db, lease: { team: string; holder: string; blueprintId: number }) {
  const quotas = (await readQuotas(db, lease.blueprintId)).filter((q) => covers(q, lease.team, lease.holder, lease.blueprintId));
  if (quotas.length === 0) return undefined;
  const atBlueprint = await countedAtBlueprint(db, lease.blueprintId);
  const overall = quotas.some((q) => q.blueprintId === null) ? await countedOverall(db, [lease.team]) : [];
  return quotaReached(quotas, (q) => (q.blueprintId === null ? overall : atBlueprint), lease);
}
