import { sql } from 'kysely';
import { statesAccepting } from '../domain/lifecycle.ts';
import type { GcAction, GcPass, StepReport } from './GcPass.ts';
import { formatDuration } from '../domain/durations.ts';

/** Checks requested at once by a pass (each holds a pool connection while it is appended). */
const REQUESTS_AT_ONCE = 4;

/**
 * The observe loop: a reconciler does not trust what it made once, it looks
 * again. For each blueprint with a check interval, each resource that can
 * be checked and was last checked longer ago than the interval (or never)
 * is asked to `check`; its own drain calls the driver and decides (a check
 * is a command like any other, so it is ordered with the resource's grants
 * and releases, and one resource is checked by one worker at a time).
 * Longest unchecked first; a resource with a check on its way is left alone.
 * A pass asks every resource due, a batch (SLIPWAY_GC_BATCH_SIZE) at a time,
 * for as long as its time budget lasts.
 *
 * A healthy resource checked every few minutes must not leave a command row
 * per check: before asking again, the collector deletes its own earlier
 * checks of these resources that changed nothing (no event recorded, so the
 * answer was the one before; they caused nothing and nobody waits on them).
 * Each resource so keeps one row for its latest unchanged check, its
 * `checked_at`, and the checks that changed something, with their events.
 * An operator's check is a person's request and stays.
 */
export async function checkResources(pass: GcPass): Promise<StepReport> {
  // Page after page while the pass has time: a large fleet of resources due
  // at one interval is asked in one pass, not one batch a minute (a resource
  // asked leaves the due ones, as its check is then on its way).
  const actions: GcAction[] = [];
  let found = 0;
  let full = true;
  while (full && !pass.outOfTime) {
    const due = await dueResources(pass);
    found += due.length;
    full = due.length >= pass.settings.batchSize;
    await forgetUnchangedChecks(
      pass,
      due.map((r) => r.id),
    );
    actions.push(...(await requestChecks(pass, due)));
  }
  return { found, actions, truncated: full };
}

/** Resources due a check, longest unchecked first, one batch of them. */
async function dueResources(pass: GcPass) {
  const { rows } = await sql<{ id: number; checked_at: Date | null; check_interval_ms: number }>`
    select r.id, r.checked_at, b.check_interval_ms
    from blueprints b
    join resources r on r.blueprint_id = b.id
    where b.check_interval_ms is not null
      and r.state = any(${statesAccepting('resource', 'check')}::text[])
      and (r.checked_at is null or r.checked_at <= now() - make_interval(secs => b.check_interval_ms / 1000.0))
      and not exists (
        select 1 from commands c
        where c.target_kind = 'resource' and c.target_id = r.id and c.kind = 'check' and c.status in ('queued', 'running'))
    order by r.checked_at nulls first, r.id
    limit ${pass.settings.batchSize}
  `.execute(pass.db);
  return rows;
}

/**
 * A `check` for each, a few requests at a time: the drains then find
 * several checks due at once and take them in one step, where one at a time
 * each would cost a step of its own.
 */
async function requestChecks(pass: GcPass, due: Awaited<ReturnType<typeof dueResources>>): Promise<GcAction[]> {
  const actions: GcAction[] = [];
  let next = 0;
  const requester = async () => {
    while (next < due.length && !pass.outOfTime) {
      const resource = due[next++]!;
      const reason = resource.checked_at ? `last checked ${resource.checked_at.toISOString()}` : 'never checked';
      actions.push(
        await pass.request({ kind: 'resource', id: resource.id }, 'check', `${reason}; checked every ${formatDuration(resource.check_interval_ms)}`),
      );
    }
  };
  await Promise.all(Array.from({ length: REQUESTS_AT_ONCE }, requester));
  return actions;
}

/** Deletes the collector's settled checks of these resources that recorded no event (see checkResources). */
async function forgetUnchangedChecks(pass: GcPass, resourceIds: readonly number[]): Promise<void> {
  if (resourceIds.length === 0) return;
  await sql`
    delete from commands c
    where c.target_kind = 'resource' and c.target_id = any(${resourceIds}::bigint[])
      and c.kind = 'check' and c.source = 'gc' and c.status = 'done'
      and not exists (select 1 from events e where e.command_id = c.id)
      -- Nor one that a request joined: its row names it.
      and not exists (select 1 from commands x where x.coalesced_into = c.id)
  `.execute(pass.db);
}
