import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { deletePreemptions, insertPreemption, type PreemptionUnderWay, readVictimCandidates } from '../../db/preemptions.ts';
import { type LineCandidate, pickNext, shareOf, type TeamUse } from '../../domain/fairShare.ts';
import { chooseVictim, type PreemptionSettings, type VictimCandidate } from '../../domain/preemption.ts';
import { formatTime } from '../../domain/times.ts';
import { type FollowUp, send } from '../messages.ts';

/** What the line's decision weighs, as preemption needs it (waitingLine.ts's Competition). */
export interface Weighing {
  readonly uses: ReadonlyMap<string, TeamUse>;
  readonly capacity: number;
  /** Whether a quota keeps the lease from a slot now, `promised` (leases that preemptions will grant) counted too. */
  blocks(lease: { team: string; holder: string | undefined }, promised?: readonly { team: string; holder: string }[]): boolean;
}

type Event = { type: string; message: string; data?: unknown };

/**
 * A blueprint decision's preemptions (decision 0043): the ones under way,
 * which it honours first (a victim's freed slot goes to the lease it was
 * taken for), settles (the lease they were for left the line or got a slot
 * elsewhere: withdrawn, the victim told, unless another waiter takes the
 * same victim over), and the new ones it makes for waiters the line could
 * not serve. Only the blueprint's drain writes the preemptions table, so
 * each decision sees every one under way.
 */
export class PreemptingLine {
  /** Preemptions under way that still stand: the victim holds its slot (or it is being cleaned), the lease they are for waits. */
  private readonly kept: PreemptionUnderWay[] = [];
  /** What each waiter a preemption is for was told, for its place in line. */
  readonly whyWaiting = new Map<number, string>();
  /** Preemptions whose lease left: their victims are withdrawn at the end of the decision unless taken over. */
  private readonly orphaned = new Map<number, PreemptionUnderWay>();
  private readonly over: number[] = [];
  /**
   * Preemptions whose victim gave its slot back, that end without their
   * grant: the lease they were for left the line or got a slot elsewhere,
   * a quota holds it back now, or the resource takes no leases now. The slot goes to the line; each is recorded as withdrawn, so the
   * history says how every preemption ended.
   */
  private readonly unserved: Array<{ p: PreemptionUnderWay; why: string }> = [];
  readonly events: Event[] = [];
  readonly followUps: FollowUp[] = [];

  constructor(
    private readonly trx: Db,
    private readonly blueprint: BlueprintRow,
    /** Null: the blueprint preempts no more (its setting turned off); those under way are withdrawn. */
    private readonly settings: PreemptionSettings | null,
    underWay: readonly PreemptionUnderWay[],
  ) {
    const freed: PreemptionUnderWay[] = [];
    for (const p of underWay) {
      if (p.forWaits && p.victimHolds && settings !== null) this.kept.push(p);
      else if (p.victimHolds) this.orphaned.set(p.victimLeaseId, p);
      // The victim's slot is the waiting lease's, once its resource grants it (a resource gone or taken out of service has none to give).
      else if (p.forWaits && p.resourceGrants) freed.push(p);
      else
        this.unserved.push({
          p,
          why: p.forWaits ? `resource ${p.resourceId} takes no leases now` : `lease ${p.forLeaseId}, which it was for, no longer waits`,
        });
    }
    this.freed = freed;
  }

  /** Preemptions whose victim has given its slot back, for the lease that waits for it: served first. */
  readonly freed: readonly PreemptionUnderWay[];

  /** A freed preemption is over: its lease got the slot. */
  served(p: PreemptionUnderWay): void {
    this.over.push(p.victimLeaseId);
  }

  /** A freed preemption whose lease may not have the slot now (`why`: the quota): it is over, and the slot goes to the line. */
  heldBack(p: PreemptionUnderWay, why: string): void {
    this.unserved.push({ p, why });
  }

  /** A freed preemption whose slot is not free yet (being cleaned, or promised to an acquire on its way): it stands until it is. */
  stillFreeing(p: PreemptionUnderWay): void {
    this.kept.push(p);
  }

  /** Whether a waiting lease already has a preemption under way for it. */
  isPreempting(leaseId: number): boolean {
    return this.kept.some((p) => p.forLeaseId === leaseId);
  }

  /**
   * After the line was served: preemptions whose lease got a slot in this
   * decision are over (withdrawn); then, for the waiters the line could not
   * serve, new ones, each waiter in the line's own order (fair share and
   * priority), each victim as chooseVictim orders them. Writes the table and
   * says what to tell whom.
   */
  async decide(waiting: readonly LineCandidate[], served: ReadonlySet<number>, weighing: Weighing, now: Date): Promise<void> {
    for (let i = this.kept.length - 1; i >= 0; i--) {
      const p = this.kept[i]!;
      if (!served.has(p.forLeaseId)) continue;
      this.kept.splice(i, 1);
      // Served elsewhere: a victim that still holds its slot keeps it, and is told so.
      if (p.victimHolds) this.orphaned.set(p.victimLeaseId, p);
      else this.unserved.push({ p, why: `lease ${p.forLeaseId}, which it was for, got a slot elsewhere` });
    }
    await deletePreemptions(this.trx, [...this.over, ...this.unserved.map((u) => u.p.victimLeaseId), ...this.orphaned.keys()]);
    for (const { p, why } of this.unserved) {
      this.events.push({
        type: 'preemption_withdrawn',
        message: `lease ${p.victimLeaseId} ended; its slot on resource ${p.resourceId} goes to the line: ${why}`,
        data: { victimLeaseId: p.victimLeaseId, forLeaseId: p.forLeaseId, resourceId: p.resourceId },
      });
    }
    if (this.settings !== null) await this.preempt(this.settings, waiting, weighing, now);
    for (const p of this.orphaned.values()) {
      const reason =
        this.settings === null
          ? `the preemption is withdrawn: blueprint ${this.blueprint.name} preempts no more`
          : `the preemption is withdrawn: lease ${p.forLeaseId}, which it was for, no longer waits`;
      this.followUps.push(send.lease.withdraw_ending(p.victimLeaseId, { kind: 'preempted', reason }, reason));
      this.events.push({
        type: 'preemption_withdrawn',
        message: `lease ${p.victimLeaseId}: ${reason}`,
        data: { victimLeaseId: p.victimLeaseId, forLeaseId: p.forLeaseId },
      });
    }
  }

  private async preempt(settings: PreemptionSettings, waiting: readonly LineCandidate[], weighing: Weighing, now: Date): Promise<void> {
    // The leases that preemptions under way will grant count against their quotas, as those made here do: a preemption is only for a grant.
    const promised = this.kept.map((p) => ({ team: p.forLease.team, holder: p.forLease.holder }));
    let candidates = waiting.filter((c) => c.priority >= settings.priorityMargin && !this.isPreempting(c.leaseId) && !weighing.blocks(c, promised));
    if (candidates.length === 0) return;
    const victims: VictimCandidate[] = await readVictimCandidates(this.trx, this.blueprint, Math.max(...candidates.map((c) => c.priority)), settings);
    const standing = (team: string) => ({ held: weighing.uses.get(team)?.use ?? 0, share: shareOf(weighing.uses, team, weighing.capacity) });
    let eligibleAt: Date | undefined;
    for (;;) {
      const next = pickNext(candidates, weighing.uses, now.getTime(), this.blueprint.priority_step_ms);
      if (!next) break;
      candidates = candidates.filter((c) => c !== next);
      if (weighing.blocks(next, promised)) continue;
      const choice = chooseVictim(next, victims, settings, standing, now);
      if (choice.victim === undefined) {
        if (choice.eligibleAt && (!eligibleAt || choice.eligibleAt < eligibleAt)) eligibleAt = choice.eligibleAt;
        continue;
      }
      const victim = choice.victim;
      victims.splice(victims.indexOf(victim), 1);
      promised.push({ team: next.team, holder: next.holder });
      await this.record(next, victim, choice.reason, now, settings);
    }
    // A waiter that may preempt only once a lease has run its minimum: the line is looked at again then.
    if (eligibleAt) {
      this.followUps.push(
        send.blueprint.serve_waiters(this.blueprint.id, `a lease may be preempted from ${formatTime(eligibleAt)}, its minimum runtime run`, {
          notBeforeMs: Math.max(0, eligibleAt.getTime() - now.getTime()),
        }),
      );
    }
  }

  private async record(preemptor: LineCandidate, victim: VictimCandidate, reason: string, now: Date, settings: PreemptionSettings) {
    const taken = this.orphaned.get(victim.leaseId);
    // A victim whose preemption was withdrawn in this decision and is chosen again keeps the end it was told of.
    const endsBy = taken?.endsBy ?? new Date(now.getTime() + settings.graceMs);
    await insertPreemption(this.trx, {
      blueprintId: this.blueprint.id,
      victimLeaseId: victim.leaseId,
      forLeaseId: preemptor.leaseId,
      resourceId: victim.resourceId,
      endsBy,
      reason,
    });
    this.whyWaiting.set(
      preemptor.leaseId,
      `preempting lease ${victim.leaseId} on resource ${victim.resourceId}, which ends by ${formatTime(endsBy)}: its slot is this lease's then`,
    );
    const data = { victimLeaseId: victim.leaseId, forLeaseId: preemptor.leaseId, resourceId: victim.resourceId, endsBy: endsBy.toISOString() };
    if (taken) {
      this.orphaned.delete(victim.leaseId);
      this.events.push({ type: 'preemption_taken_over', message: `lease ${victim.leaseId}, ${reason} (was for lease ${taken.forLeaseId})`, data });
      return;
    }
    this.events.push({ type: 'preempting', message: `lease ${victim.leaseId} ${reason}; it ends by ${formatTime(endsBy)}`, data });
    this.followUps.push(send.lease.notify_ending(victim.leaseId, { kind: 'preempted', at: endsBy.toISOString(), reason }, reason));
  }
}
