import { type RawBuilder, sql } from 'kysely';
import type { GcAction, GcPass, StepReport } from './GcPass.ts';
import { formatDuration } from '../domain/durations.ts';
import { formatTime } from '../domain/times.ts';

/**
 * An idle resource the collector may reclaim: active, no lease holds a
 * slot, idle since before `idleBefore`, and nothing in its queue (an acquire
 * on its way means a lease is about to take it).
 */
const idleCandidate = (idleBefore: RawBuilder<unknown>) => sql`
  r.state = 'active' and r.used_slots = 0 and r.idle_since <= ${idleBefore}
  and not exists (
    select 1 from commands c
    where c.target_kind = 'resource' and c.target_id = r.id and c.status in ('queued', 'running'))`;

/** A resource with a release or reclaim on its way, i.e. already going. */
const going = sql`exists (
  select 1 from commands c
  where c.target_kind = 'resource' and c.target_id = r.id
    and c.kind in ('release', 'reclaim') and c.status in ('queued', 'running'))`;

/** A resource to reclaim, and why, in words for the command's reason. */
interface Candidate {
  readonly resourceId: number;
  readonly reason: string;
}

interface IdleRow {
  readonly name: string;
  readonly resource_id: number;
  readonly idle_since: Date;
}

/**
 * Blueprints at their limit with leases waiting: one idle resource reclaimed
 * per waiting lease, less the room already being made (resources released,
 * broken or being reclaimed, and destroyed ones the blueprint has not yet
 * counted out). When the reclaimed resource is destroyed, the blueprint
 * makes a new one for its oldest waiting lease.
 *
 * Only leases a new resource is sure to serve count: not those with a
 * selector (an idle resource they do not match would be replaced by one
 * they may not match either, a static pool's freed entry again, every
 * pass), nor those of a team with a quota (a quota, not the room, may be
 * what holds them back). They wait for a resource they match to free up,
 * or for their quota (docs/known-limits.md).
 */
async function forWaitingLeases(pass: GcPass): Promise<Candidate[]> {
  const graceEnd = sql`now() - make_interval(secs => ${pass.settings.idleGraceMs / 1000}::float8)`;
  const { rows } = await sql<IdleRow & { waiting: number; max_resources: number }>`
    with full_blueprints as (
      select b.id, b.name, b.max_resources,
        (select count(*) from blueprint_waiters w join leases l on l.id = w.lease_id
          where w.blueprint_id = b.id and l.state = 'pending' and l.selector is null
            and not exists (select 1 from quotas q where q.team = l.team))::int as waiting,
        ((select count(*) from resources r
           where r.blueprint_id = b.id and (r.state in ('released', 'broken') or (r.state in ('pending', 'active') and ${going})))
         + (select count(*) from commands c
           where c.target_kind = 'blueprint' and c.target_id = b.id and c.kind = 'resource_destroyed'
             and c.status in ('queued', 'running')))::int as making_room
      from blueprints b
      where b.live_resources >= b.max_resources
        and exists (select 1 from blueprint_waiters w where w.blueprint_id = b.id)
    )
    select f.name, f.waiting, f.max_resources, r.id as resource_id, r.idle_since
    from full_blueprints f
    cross join lateral (
      select r.id, r.idle_since from resources r
      where r.blueprint_id = f.id and ${idleCandidate(graceEnd)}
      order by r.idle_since, r.id
      limit greatest(f.waiting - f.making_room, 0)
    ) r
    order by f.id, r.idle_since
    limit ${pass.settings.batchSize}
  `.execute(pass.db);
  return rows.map((c) => ({
    resourceId: c.resource_id,
    reason: `idle since ${formatTime(c.idle_since)}; blueprint ${c.name} is at its limit of ${c.max_resources} with ${c.waiting} lease(s) waiting`,
  }));
}

/**
 * Blueprints with an idle timeout: idle resources beyond the warm minimum,
 * idle for longer than the timeout, oldest idle first.
 */
async function beyondMinimum(pass: GcPass): Promise<Candidate[]> {
  const timeoutEnd = sql`now() - make_interval(secs => b.idle_timeout_ms / 1000.0)`;
  const { rows } = await sql<IdleRow & { kept: number; min_resources: number; idle_timeout_ms: number }>`
    select b.name, b.min_resources, b.idle_timeout_ms, k.kept, r.id as resource_id, r.idle_since
    from blueprints b
    cross join lateral (
      select count(*)::int as kept from resources r
      where r.blueprint_id = b.id and r.state in ('pending', 'active') and not ${going}
    ) k
    cross join lateral (
      select r.id, r.idle_since from resources r
      where r.blueprint_id = b.id and ${idleCandidate(timeoutEnd)}
      order by r.idle_since, r.id
      limit greatest(k.kept - b.min_resources, 0)
    ) r
    where b.idle_timeout_ms is not null
    order by b.id, r.idle_since
    limit ${pass.settings.batchSize}
  `.execute(pass.db);
  return rows.map((c) => ({
    resourceId: c.resource_id,
    reason: `idle since ${formatTime(c.idle_since)}, longer than blueprint ${c.name}'s idle timeout of ${formatDuration(c.idle_timeout_ms)}; ${c.kept} kept, minimum ${c.min_resources}`,
  }));
}

/**
 * Reclaims idle resources, through a `reclaim` command on each: first to
 * make room for leases waiting at a full blueprint, then those beyond a
 * blueprint's warm minimum that outstayed its idle timeout. The resource
 * applies the reclaim only if it is still idle then; a lease that took it
 * first keeps it, and no lease lands on it once it is reclaimed.
 */
export async function reclaimIdleResources(pass: GcPass): Promise<StepReport> {
  const actions: GcAction[] = [];
  let found = 0;
  let truncated = false;
  // In this order, each reading after the previous one's reclaims are
  // queued, so the second does not count a resource the first is reclaiming.
  const finders = [forWaitingLeases, beyondMinimum];
  for (const find of finders) {
    if (pass.outOfTime) return { found, actions, truncated: true };
    const candidates = await find(pass);
    found += candidates.length;
    truncated ||= candidates.length >= pass.settings.batchSize;
    for (const candidate of candidates) {
      if (pass.outOfTime) return { found, actions, truncated: true };
      actions.push(await pass.request({ kind: 'resource', id: candidate.resourceId }, 'reclaim', candidate.reason));
    }
  }
  return { found, actions, truncated };
}
