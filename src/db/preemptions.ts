import { sql } from 'kysely';
import type { Db } from './Database.ts';
import { liveStates, statesWith } from '../domain/lifecycle.ts';
import type { LineCandidate } from '../domain/fairShare.ts';
import { type Labels, parseSelector, resourceLabels } from '../domain/labels.ts';
import type { PreemptionSettings, VictimCandidate } from '../domain/preemption.ts';

/**
 * A blueprint's preemptions under way (the `preemptions` table, which only
 * its drain writes), and the active leases it may preempt.
 */

/** A preemption under way, with what a decision needs of its two leases now. */
export interface PreemptionUnderWay {
  readonly victimLeaseId: number;
  readonly forLeaseId: number;
  readonly resourceId: number;
  readonly endsBy: Date;
  readonly reason: string;
  /** The victim still holds its slot on the resource. */
  readonly victimHolds: boolean;
  /** The lease it is for still waits in the blueprint's line, with no slot. */
  readonly forWaits: boolean;
  /** The resource still grants slots (not gone, cordoned or quarantined): the victim's slot will be free there. */
  readonly resourceGrants: boolean;
  /** The lease it is for, as the line serves it (its place in line its request's time, once it left the line). */
  readonly forLease: LineCandidate;
}

/** The lease a preemption is for, as readPreemptions' JSON answers it (times as text). */
interface ForLeaseRead {
  readonly team: string;
  readonly holder: string;
  readonly priority: number;
  readonly selector: string | null;
  readonly requestedAt: string;
  readonly since: string | null;
}

/** The blueprint's preemptions under way, oldest first. */
export async function readPreemptions(trx: Db, blueprintId: number): Promise<PreemptionUnderWay[]> {
  const holding = statesWith('lease', 'holdsSlot').map((state) => sql.lit(state));
  const granting = statesWith('resource', 'grantsSlots').map((state) => sql.lit(state));
  const { rows } = await sql<Omit<PreemptionUnderWay, 'forLease'> & { forLease: ForLeaseRead }>`
    select p.victim_lease_id as "victimLeaseId", p.for_lease_id as "forLeaseId", p.resource_id as "resourceId",
           p.ends_by as "endsBy", p.reason,
           (v.state in (${sql.join(holding)}) and v.resource_id = p.resource_id) as "victimHolds",
           (f.state = 'pending' and f.resource_id is null and w.lease_id is not null) as "forWaits",
           (r.state in (${sql.join(granting)})) as "resourceGrants",
           json_build_object('team', f.team, 'holder', f.holder, 'priority', f.priority, 'selector', f.selector,
             'requestedAt', f.created_at, 'since', w.since) as "forLease"
    from preemptions p
    join leases v on v.id = p.victim_lease_id
    join leases f on f.id = p.for_lease_id
    join resources r on r.id = p.resource_id
    left join blueprint_waiters w on w.lease_id = p.for_lease_id and w.blueprint_id = p.blueprint_id
    where p.blueprint_id = ${blueprintId}
    order by p.created_at, p.victim_lease_id
  `.execute(trx);
  // json_build_object answers the times as text.
  return rows.map(({ forLease: f, ...r }) => ({
    ...r,
    forLease: {
      leaseId: r.forLeaseId,
      team: f.team,
      holder: f.holder,
      priority: f.priority,
      requestedAt: new Date(f.requestedAt),
      since: new Date(f.since ?? f.requestedAt),
      ...(f.selector === null ? {} : { selector: parseSelector(f.selector) }),
    },
  }));
}

/**
 * How many possible victims a decision reads: the lowest priorities first,
 * the latest grants among them (docs/known-limits.md).
 */
const VICTIMS_READ = 1024;

/**
 * The active leases of the blueprint that a lease of priority `priority`
 * may preempt with the blueprint's margin: holding a slot on a resource
 * that grants slots, not already a victim, and preemptible, or created not
 * to be but beyond its team's allowance of those (the team's first ones
 * granted are protected: createLease's look lets two requests at once
 * past it); the lowest priorities first.
 */
export async function readVictimCandidates(
  trx: Db,
  blueprint: { readonly id: number; readonly labels: unknown },
  priority: number,
  settings: Pick<PreemptionSettings, 'priorityMargin' | 'protectedPerTeam'>,
): Promise<VictimCandidate[]> {
  const holding = statesWith('lease', 'holdsSlot').map((state) => sql.lit(state));
  const granting = statesWith('resource', 'grantsSlots').map((state) => sql.lit(state));
  const { rows } = await sql<{ id: number; team: string; priority: number; granted_at: Date; resource_id: number; labels: Labels }>`
    select l.id, l.team, l.priority, l.granted_at, l.resource_id, r.labels
    from (
      select l.*, row_number() over (partition by l.team, l.preemptible order by l.granted_at, l.id) as rank
      from leases l
      where l.blueprint_id = ${blueprint.id} and l.state in (${sql.join(holding)}) and l.granted_at is not null
    ) l
    join resources r on r.id = l.resource_id
    where l.priority <= ${priority - settings.priorityMargin} and (l.preemptible or l.rank > ${settings.protectedPerTeam})
      and r.state in (${sql.join(granting)})
      and not exists (select from preemptions p where p.victim_lease_id = l.id)
    order by l.priority, l.granted_at desc, l.id
    limit ${VICTIMS_READ}
  `.execute(trx);
  return rows.map((r) => ({
    leaseId: r.id,
    team: r.team,
    priority: r.priority,
    grantedAt: r.granted_at,
    resourceId: r.resource_id,
    labels: resourceLabels(r.labels, blueprint.labels),
  }));
}

/** Records a preemption the blueprint's decision made. */
export async function insertPreemption(
  trx: Db,
  row: { blueprintId: number; victimLeaseId: number; forLeaseId: number; resourceId: number; endsBy: Date; reason: string },
): Promise<void> {
  await trx
    .insertInto('preemptions')
    .values({
      blueprint_id: row.blueprintId,
      victim_lease_id: row.victimLeaseId,
      for_lease_id: row.forLeaseId,
      resource_id: row.resourceId,
      ends_by: row.endsBy,
      reason: row.reason,
    })
    .execute();
}

/** Removes preemptions that are over: served, or withdrawn. */
export async function deletePreemptions(trx: Db, victimLeaseIds: readonly number[]): Promise<void> {
  if (victimLeaseIds.length > 0) await trx.deleteFrom('preemptions').where('victim_lease_id', 'in', victimLeaseIds).execute();
}

/** Whether a lease is one a preemption under way is for (its leaving withdraws it). */
export async function isPreempting(db: Db, leaseId: number): Promise<boolean> {
  const row = await db.selectFrom('preemptions').select('victim_lease_id').where('for_lease_id', '=', leaseId).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** The live leases of `team` at the blueprint created not to be preempted. */
export async function countProtected(db: Db, blueprintId: number, team: string): Promise<number> {
  const row = await db
    .selectFrom('leases')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('blueprint_id', '=', blueprintId)
    .where('team', '=', team)
    .where('preemptible', '=', false)
    .where('state', 'in', liveStates('lease'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
