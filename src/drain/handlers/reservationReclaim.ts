import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { reclaimable, reclaimUnderWay, slotsBeingCleaned } from '../sql/reclaimedLeases.ts';
import { preemptionOf, PreemptionSettingsSchema } from '../../domain/preemption.ts';
import { formatTime } from '../../domain/times.ts';
import { type FollowUp, send } from '../messages.ts';
import type { ReservedRoom } from './reservedRoom.ts';

type Event = { type: string; message: string; data?: unknown };

/** The grace period a reclaimed lease gets: its blueprint's preemption.graceMs, or preemption's default. */
const graceOf = (blueprint: BlueprintRow) => (preemptionOf(blueprint.preemption) ?? PreemptionSettingsSchema.parse({})).graceMs;

/**
 * Slots reclaimed for the open reservations of a blueprint (decision 0045),
 * after its line was served: when what their leases do not use yet is more
 * than the room left, as many other leases as make up the difference, less
 * those told already, are told they end after the blueprint's grace period
 * (an ending of kind `reclaimed`, as a preempted lease is told). Their slots
 * are then held back for the reservations as any free slot is. When the
 * reservations need fewer (one was cancelled, ended, handed its slots back,
 * or its slots freed by themselves), the last told are told it is withdrawn.
 * Leases of the open reservations, and leases not preemptible, are not
 * reclaimed; the lowest priority goes first, then the shortest run.
 */
export async function reclaimForReservations(
  trx: Db,
  blueprint: BlueprintRow,
  reserved: ReservedRoom,
  roomLeft: number,
  now: Date,
): Promise<{ events: Event[]; followUps: FollowUp[] }> {
  const events: Event[] = [];
  const followUps: FollowUp[] = [];
  // A slot being cleaned (a reclaimed lease's, given back) is room to come: counted, or each cleaning would reclaim one more.
  const cleaning = blueprint.clean_between_leases ? await slotsBeingCleaned(trx, blueprint.id) : 0;
  const needed = Math.max(0, reserved.unusedNow() - roomLeft - cleaning);
  const underWay = await reclaimUnderWay(trx, blueprint.id);
  if (needed > underWay.length) {
    const open = reserved.openIds;
    const at = new Date(now.getTime() + graceOf(blueprint));
    const reason = `reclaimed for reservation(s) ${open.join(', ')} at blueprint ${blueprint.name}, whose window is open`;
    for (const victim of await reclaimable(trx, blueprint.id, open, needed - underWay.length)) {
      followUps.push(send.lease.notify_ending(victim.id, { kind: 'reclaimed', at: at.toISOString(), reason }, reason));
      events.push({
        type: 'reservation_reclaim',
        message: `lease ${victim.id} ${reason}; it ends by ${formatTime(at)}`,
        data: { leaseId: victim.id, reservations: open, endsBy: at.toISOString() },
      });
    }
  }
  for (const victim of underWay.slice(0, Math.max(0, underWay.length - needed))) {
    const reason = `the reservations at blueprint ${blueprint.name} no longer need its slot`;
    followUps.push(send.lease.withdraw_ending(victim.id, { kind: 'reclaimed', reason }, reason));
    events.push({ type: 'reservation_reclaim_withdrawn', message: `lease ${victim.id}: ${reason}`, data: { leaseId: victim.id } });
  }
  return { events, followUps };
}
