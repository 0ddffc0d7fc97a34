import { sql } from 'kysely';
import type { GcPass, StepReport } from './GcPass.ts';

/**
 * Asks each enabled blueprint with fewer warm resources than its minimum to
 * `top_up`. The blueprint, single writer of its resource count, decides how
 * many to make within its limit; this only notices the shortfall.
 */
export async function topUpWarmMinimum(pass: GcPass): Promise<StepReport> {
  const { rows } = await sql<{ id: number; name: string; min_resources: number; warm: number }>`
    select b.id, b.name, b.min_resources, w.warm
    from blueprints b
    cross join lateral (
      select count(*)::int as warm from resources r
      where r.blueprint_id = b.id and r.state in ('pending', 'active')
        and not exists (
          select 1 from commands c
          where c.target_kind = 'resource' and c.target_id = r.id
            and c.kind in ('release', 'reclaim') and c.status in ('queued', 'running'))
    ) w
    where b.state = 'enabled' and b.min_resources > 0
      and w.warm < b.min_resources and b.live_resources < b.max_resources
      and not exists (
        select 1 from commands c
        where c.target_kind = 'blueprint' and c.target_id = b.id and c.kind = 'top_up' and c.status in ('queued', 'running'))
    order by b.id
    limit ${pass.settings.batchSize}
  `.execute(pass.db);
  const actions = [];
  for (const b of rows) {
    if (pass.outOfTime) break;
    const reason = `${b.warm} warm resource(s) of a minimum of ${b.min_resources}`;
    actions.push(await pass.request({ kind: 'blueprint', id: b.id }, 'top_up', reason));
  }
  return { found: rows.length, actions, truncated: actions.length < rows.length || rows.length >= pass.settings.batchSize };
}
