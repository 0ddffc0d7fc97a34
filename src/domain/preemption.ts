import { z } from 'zod';
import { formatDuration } from './durations.ts';
import { type Labels, matches, type Selector } from './labels.ts';
import { PRIORITY_RANGE } from './priority.ts';

/**
 * Preemption (docs/scheduling.md, "Preemption"; decision 0043): a blueprint
 * that allows it takes a slot back from an active lease for a waiting one
 * that the line cannot serve, when the waiting lease's priority is at least
 * `priorityMargin` above the victim's and the victim has run at least
 * `minRuntimeMs`. The victim's holder is told at once and has `graceMs` to
 * wrap up (the lease's `ending`, kind `preempted`); the slot then goes to
 * the lease it was taken for.
 */
export const PreemptionSettingsSchema = z
  .object({
    /** How much higher a waiting lease's priority must be than its victim's. */
    priorityMargin: z
      .number()
      .int()
      .min(1, 'expected a margin of 1 to 9: a lease never preempts one of its own priority')
      .max(PRIORITY_RANGE.max, 'expected a margin of 1 to 9')
      .default(1),
    /** How long a lease runs (from its grant) before it may be preempted. */
    minRuntimeMs: z
      .number()
      .int()
      .min(0)
      .max(366 * 24 * 3600 * 1000)
      .default(0),
    /** How long a victim's holder has to wrap up before Slipway ends its lease. */
    graceMs: z
      .number()
      .int()
      .min(0)
      .max(24 * 3600 * 1000, 'expected a grace period of at most a day')
      .default(5 * 60_000),
    /**
     * How many leases of one team at the blueprint may be created not to be
     * preempted at once (the quota that keeps everyone from asking so).
     */
    protectedPerTeam: z.number().int().min(0).max(100_000).default(0),
  })
  .strict();
export type PreemptionSettings = z.output<typeof PreemptionSettingsSchema>;

/** A blueprint's `preemption` column read back, or null where it preempts nothing. */
export function preemptionOf(column: unknown): PreemptionSettings | null {
  return column === null || column === undefined ? null : PreemptionSettingsSchema.parse(column);
}

/** A blueprint's preemption settings as the CLI and the web UI show them. */
export function describePreemption(settings: PreemptionSettings | null): string {
  return settings === null
    ? 'off'
    : `for a lease ${settings.priorityMargin} or more priority levels above its victim; a victim runs at least ${formatDuration(settings.minRuntimeMs)} and has ${formatDuration(settings.graceMs)} to wrap up; ${settings.protectedPerTeam} lease(s) per team may be created not preemptible`;
}

/** An active lease as a possible victim. */
export interface VictimCandidate {
  readonly leaseId: number;
  readonly team: string;
  readonly priority: number;
  readonly grantedAt: Date;
  readonly resourceId: number;
  /** Its resource's labels (the blueprint's over its driver's). */
  readonly labels: Labels;
}

/** A waiting lease the line cannot serve. */
export interface Preemptor {
  readonly leaseId: number;
  readonly team: string;
  readonly priority: number;
  readonly selector?: Selector;
}

/** A team's place against its fair share of the blueprint: the slots it holds now, and its share of them. */
export interface TeamStanding {
  readonly held: number;
  readonly share: number;
}

export type VictimChoice =
  | { readonly victim: VictimCandidate; readonly reason: string }
  /** None now; `eligibleAt`: the first time a lease that only runs too briefly now would become one. */
  | { readonly victim: undefined; readonly eligibleAt: Date | undefined };

/**
 * The victim for `preemptor`, or none: among the candidates whose priority
 * is at least the margin below its own and whose slot its selector
 * matches, one that has run the minimum: the lowest priority first, then
 * the team furthest above its fair share, then the one that has run the
 * shortest time (the least work lost).
 */
export function chooseVictim(
  preemptor: Preemptor,
  candidates: readonly VictimCandidate[],
  settings: PreemptionSettings,
  standing: (team: string) => TeamStanding,
  now: Date,
): VictimChoice {
  const runsFrom = now.getTime() - settings.minRuntimeMs;
  let eligibleAt: number | undefined;
  let best: VictimCandidate | undefined;
  const above = (c: VictimCandidate) => {
    const s = standing(c.team);
    return s.held - s.share;
  };
  for (const c of candidates) {
    if (preemptor.priority - c.priority < settings.priorityMargin) continue;
    if (preemptor.selector !== undefined && !matches(preemptor.selector, c.labels)) continue;
    if (c.grantedAt.getTime() > runsFrom) {
      const at = c.grantedAt.getTime() + settings.minRuntimeMs;
      eligibleAt = eligibleAt === undefined ? at : Math.min(eligibleAt, at);
      continue;
    }
    if (best === undefined || comesFirst(c, best, above)) best = c;
  }
  if (best === undefined) return { victim: undefined, eligibleAt: eligibleAt === undefined ? undefined : new Date(eligibleAt) };
  return { victim: best, reason: preemptionReason(preemptor, best, standing(best.team), now) };
}

function comesFirst(a: VictimCandidate, b: VictimCandidate, above: (c: VictimCandidate) => number): boolean {
  if (a.priority !== b.priority) return a.priority < b.priority;
  const over = above(a) - above(b);
  if (over !== 0) return over > 0;
  const ran = b.grantedAt.getTime() - a.grantedAt.getTime();
  return ran !== 0 ? ran < 0 : a.leaseId > b.leaseId;
}

/** Why a victim was chosen: "preempted for lease 42: priority 9 against 2; team qa at 3 of its share of 2; ran 4m". */
export function preemptionReason(preemptor: Preemptor, victim: VictimCandidate, standing: TeamStanding, now: Date): string {
  const ran = Math.max(0, Math.round((now.getTime() - victim.grantedAt.getTime()) / 1000) * 1000);
  return `preempted for lease ${preemptor.leaseId}: priority ${preemptor.priority} against ${victim.priority}; team ${victim.team} at ${standing.held} of its share of ${oneDecimal(standing.share)}; ran ${formatDuration(ran)}`;
}

const oneDecimal = (n: number) => Number(n.toFixed(1));
