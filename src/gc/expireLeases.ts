import { sql } from 'kysely';
import { statesWith } from '../domain/lifecycle.ts';
import { type DeadlineFields, describeDeadline } from '../objects/leaseDeadlines.ts';
import type { GcPass, StepReport } from './GcPass.ts';

/** Lease states whose leases can still be released for expiry. */
const EXPIRABLE = ['pending', 'acquired', 'active'] as const;

/**
 * Issues a `release` for each live lease past its expiry time or heartbeat
 * deadline, or still setting up past its wait deadline, marked `ifExpired`:
 * the lease checks the deadline again when it applies it (see the lease's
 * release handler), so a renewal queued first, or a grant that activated
 * the lease first, wins. A lease with a release already on its way is left
 * alone, so a pass neither coalesces into it nor repeats itself. A wait
 * deadline's release is asked for as `system:deadline`, the others as
 * `system:gc`.
 */
export async function expireLeases(pass: GcPass): Promise<StepReport> {
  const { rows } = await sql<DeadlineFields & { id: number; now: Date }>`
    select l.id, l.state, l.expires_at, l.heartbeat_deadline, l.heartbeat_ms, l.wait_deadline, l.created_at, now() as now
    from leases l
    where l.state = any(${[...EXPIRABLE]}::text[])
      and (l.expires_at <= now() or l.heartbeat_deadline <= now()
           or (l.wait_deadline <= now() and l.state = any(${statesWith('lease', 'isSettingUp')}::text[])))
      and not exists (
        select 1 from commands c
        where c.target_kind = 'lease' and c.target_id = l.id and c.kind = 'release' and c.status in ('queued', 'running'))
    order by least(l.expires_at, l.heartbeat_deadline, l.wait_deadline), l.id
    limit ${pass.settings.batchSize}
  `.execute(pass.db);
  const actions = [];
  for (const lease of rows) {
    if (pass.outOfTime) break;
    const { reason, issuedBy } = describeDeadline(lease, lease.now)!;
    actions.push(await pass.request({ kind: 'lease', id: lease.id }, 'release', reason, { ifExpired: true }, issuedBy));
  }
  return { found: rows.length, actions, truncated: rows.length >= pass.settings.batchSize || actions.length < rows.length };
}
