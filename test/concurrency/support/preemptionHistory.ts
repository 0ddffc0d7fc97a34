import { sql } from 'kysely';
import type { Db } from '../../../src/db/Database.ts';

/** An event as the history checks read it. */
export interface HistoryEvent {
  readonly id: number;
  readonly target_kind: string;
  readonly target_id: number;
  readonly type: string;
  readonly to_state: string | null;
  readonly actor: string;
  readonly data: unknown;
  readonly created_at: Date;
}

/** Every event, in the order of their ids. */
export function readHistory(db: Db): Promise<HistoryEvent[]> {
  return db
    .selectFrom('events')
    .select(['id', 'target_kind', 'target_id', 'type', 'to_state', 'actor', 'data', 'created_at'])
    .orderBy('id')
    .execute();
}

type SlotData = { leaseId: number; slot: number };

/**
 * Slots granted while another lease held them, replayed from the
 * resources' `slot_granted` and `slot_freed` events. A slot is granted only
 * after the return that freed it committed, whose event was written (and
 * its id taken) before that commit, so the replay by id is faithful.
 */
export function slotsGrantedTwice(events: readonly HistoryEvent[]): string[] {
  const holders = new Map<string, number>();
  const doubled: string[] = [];
  for (const e of events) {
    if (e.target_kind !== 'resource' || (e.type !== 'slot_granted' && e.type !== 'slot_freed')) continue;
    const { leaseId, slot } = e.data as SlotData;
    const key = `resource ${e.target_id} slot ${slot}`;
    const holder = holders.get(key);
    if (e.type === 'slot_granted') {
      if (holder !== undefined) doubled.push(`${key} to lease ${leaseId} while lease ${holder} held it (event ${e.id})`);
      holders.set(key, leaseId);
    } else if (holder === leaseId) holders.delete(key);
    else doubled.push(`${key} freed by lease ${leaseId}, held by ${holder ?? 'nobody'} (event ${e.id})`);
  }
  return doubled;
}

/** One preemption of a victim, from its `preempting` event to its withdrawal (if it was withdrawn). */
export interface PreemptionTrail {
  readonly victim: number;
  /** The lease it was for in the end (another waiter may have taken it over). */
  forLease: number;
  readonly resourceId: number;
  readonly endsBy: Date;
  readonly startedAt: number;
  /** The id of the event that withdrew it. */
  withdrawnAt?: number;
}

type PreemptionData = { victimLeaseId: number; forLeaseId: number; resourceId: number; endsBy: string };

/** Every preemption the blueprints made, replayed from their `preempting`, `preemption_taken_over` and `preemption_withdrawn` events. */
export function preemptionTrails(events: readonly HistoryEvent[]): { trails: PreemptionTrail[]; breaks: string[] } {
  const trails: PreemptionTrail[] = [];
  const open = new Map<number, PreemptionTrail>();
  const breaks: string[] = [];
  for (const e of events) {
    if (e.target_kind !== 'blueprint') continue;
    const data = e.data as PreemptionData;
    const underWay = open.get(data?.victimLeaseId);
    if (e.type === 'preempting') {
      if (underWay)
        breaks.push(`event ${e.id}: lease ${data.victimLeaseId} preempted again while its preemption for lease ${underWay.forLease} stood`);
      const trail = {
        victim: data.victimLeaseId,
        forLease: data.forLeaseId,
        resourceId: data.resourceId,
        endsBy: new Date(data.endsBy),
        startedAt: e.id,
      };
      trails.push(trail);
      open.set(trail.victim, trail);
    } else if (e.type === 'preemption_taken_over') {
      if (!underWay) breaks.push(`event ${e.id}: lease ${data.victimLeaseId}'s preemption taken over, none under way`);
      else if (underWay.endsBy.getTime() !== Date.parse(data.endsBy)) breaks.push(`event ${e.id}: taken over with another end than the one told`);
      else underWay.forLease = data.forLeaseId;
    } else if (e.type === 'preemption_withdrawn') {
      if (!underWay) breaks.push(`event ${e.id}: lease ${data.victimLeaseId}'s preemption withdrawn, none under way`);
      else {
        underWay.withdrawnAt = e.id;
        open.delete(underWay.victim);
      }
    }
  }
  return { trails, breaks };
}

/** The events and commands of `leaseIds` (and their preemptions and slots), in time order: what a failed check shows. */
export async function timelineOf(db: Db, leaseIds: readonly number[]): Promise<string> {
  const ids = sql.join(leaseIds);
  const { rows } = await sql<{ k: string; id: number; created_at: Date; target: string; type: string; actor: string; message: string }>`
    select 'event' as k, id, created_at, target_kind || ' ' || target_id as target, type, actor, message from events
      where (target_kind = 'lease' and target_id in (${ids})) or (data->>'victimLeaseId')::bigint in (${ids})
        or (data->>'forLeaseId')::bigint in (${ids}) or (target_kind = 'resource' and (data->>'leaseId')::bigint in (${ids}))
    union all
    select 'command', id, created_at, target_kind || ' ' || target_id, kind, issued_by, coalesce(reason, '') || ' => ' || coalesce(message, '') from commands
      where (target_kind = 'lease' and target_id in (${ids})) or (payload->>'leaseId')::bigint in (${ids})
    order by created_at, k
  `.execute(db);
  return rows.map((r) => `${r.created_at.toISOString()} ${r.k} ${r.id} ${r.target} ${r.type} [${r.actor}] ${r.message}`).join('\n');
}
