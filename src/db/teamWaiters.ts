import { sql } from 'kysely';
import type { Db } from './Database.ts';

/**
 * The blueprints where a team has a lease waiting that one of its quotas
 * covers (or, `anyQuota: false`, where the team waits at all). A lease of
 * the team that stops counting (its slot given back), or a quota raised,
 * may let those blueprints serve a waiter a quota held back, and they hear
 * of it from nothing else: a slot given back on a resource in maintenance,
 * or one that is cleaned first, or at another blueprint, offers nothing to
 * them. The team is named, or is that of `leaseId`. Without a quota of the
 * team, one look at the quotas answers; with one, one index probe per
 * blueprint (blueprint_waiters_by_team).
 */
export async function blueprintsWhereTeamWaits(db: Db, team: string | { leaseId: number }, options: { anyQuota: boolean }): Promise<number[]> {
  const name = typeof team === 'string' ? sql`${team}::text` : sql`(select team from leases where id = ${team.leaseId})`;
  const { rows } = await sql<{ id: number }>`
    with t as (select ${name} as team)
    select b.id from blueprints b, t
    where (not ${options.anyQuota} or exists (select 1 from quotas q where q.team = t.team))
      and (not ${options.anyQuota} or exists (select 1 from quotas q where q.team = t.team and (q.blueprint_id is null or q.blueprint_id = b.id)))
      and exists (select 1 from blueprint_waiters w where w.blueprint_id = b.id and w.team = t.team)
    order by b.id
  `.execute(db);
  return rows.map((r) => r.id);
}
