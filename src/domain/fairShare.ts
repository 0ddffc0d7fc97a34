import { formatDuration } from './durations.ts';
import type { Selector } from './labels.ts';

/**
 * Which waiting lease a blueprint serves when it has room
 * (docs/scheduling.md). Each team's line is served in its own order (by
 * place: request time less what the priority is worth, domain/priority.ts),
 * so only the first waiter of each team competes. Among those:
 *
 * 1. the highest level wins: the lease's priority, plus one for every
 *    priority step it has waited (aging; with the step off, every lease is
 *    level 0 and priorities do not count, as the line is then served in
 *    request order);
 * 2. among equal levels, the team whose load against its weight would be
 *    lowest once served: its load is what it held at the blueprint lately
 *    (its slot-time, decayed with the blueprint's half-life, in slots held
 *    on average), and what its slots held now, and the one it would get,
 *    will likely add (perHeld); so a team that got less than its share
 *    lately is served until it has caught up (decision 0040);
 * 3. then the earlier place, then the lower lease id.
 *
 * A team's first waiter has the highest level in its team (level rises
 * with the place), so comparing first waiters is comparing everyone. No
 * lease starves: its level rises by one every step it waits, while a new
 * request starts at its priority (at most 9), so after 9 steps at most the
 * leases requested after it stop going ahead of it; the teams that got
 * slots meanwhile have the higher load.
 */
export interface Candidate {
  readonly leaseId: number;
  readonly team: string;
  /** Its place in line. */
  readonly since: Date;
  readonly requestedAt: Date;
  readonly priority: number;
}

/** A lease as a blueprint's line serves it: a candidate, whose holder a quota may count, with what it needs of a resource's labels (none: any). */
export type LineCandidate = Candidate & { readonly holder: string; readonly selector?: Selector };

/** A team's weight, and its use of the blueprint: now, and lately. */
export interface TeamUse {
  readonly weight: number;
  /** What each slot it holds now adds to `recent` (perHeld). */
  readonly perHeld: number;
  /** Its leases at the blueprint now: holding slots, or sent to take one. */
  readonly use: number;
  /** The slots it held there on average lately: its decayed slot-time over the decay's mean life (recentSlots). */
  readonly recent: number;
}

/**
 * The least a slot held now adds to its team's load (in slots held lately):
 * little, so that the shares come from the time slots were held, which is
 * what they promise (decision 0040), and not from one instant, which on a
 * pool too small for the weights cannot express them; but something, so
 * that teams with no history at the blueprint (all at 0) share it by
 * weight at once, not all to one team.
 */
const LEAST_PER_HELD = 1 / 1000;

/**
 * What a slot held now adds to its team's load (in slots held lately): the
 * time it will likely still be held, a mean hold at the blueprint (its
 * decayed slot-time per grant, over every team in `uses`), weighed as time
 * held lately is. Time is counted as it passes: without this, a lease just
 * granted would cost its team nothing yet, and a team of small weight
 * would be granted a second slot, and a third, on the strength of time not
 * yet counted, and hold more than its share.
 */
export function perHeld(uses: readonly DecayedUse[], halfLifeMs: number): number {
  let slotSeconds = 0;
  let grants = 0;
  for (const u of uses) {
    slotSeconds += u.slotSeconds;
    grants += u.grants;
  }
  return Math.max(LEAST_PER_HELD, grants === 0 ? 0 : slotSeconds / grants / meanLifeSeconds(halfLifeMs));
}

/**
 * What a team used at a blueprint, decayed: its slot-seconds and its
 * grants, each second (and grant) weighed by 2^(-its age ÷ half-life), as
 * the blueprint's drain keeps them (src/db/teamUsage.ts).
 */
export interface DecayedUse {
  readonly slotSeconds: number;
  readonly grants: number;
}

/** The mean life of the decay, in seconds: a slot held for good comes to this many slot-seconds. */
const meanLifeSeconds = (halfLifeMs: number) => halfLifeMs / 1000 / Math.LN2;

/**
 * `use` brought forward by `ageMs`, `held` slots held all along: the old
 * weighed down by the decay, and the held slots' seconds since, each
 * weighed by its own age (the integral of the decay over them).
 */
export function decayUse(use: DecayedUse, ageMs: number, halfLifeMs: number, held: number): DecayedUse {
  const kept = 2 ** (-Math.max(0, ageMs) / halfLifeMs);
  return { slotSeconds: use.slotSeconds * kept + held * meanLifeSeconds(halfLifeMs) * (1 - kept), grants: use.grants * kept };
}

/** A blueprint's half-life, in words, as its views give it. */
export function describeHalfLife(halfLifeMs: number): string {
  return `shares of slot-time, with a half-life of ${formatDuration(halfLifeMs)}`;
}

/** The slots held on average that decayed slot-time comes to (a slot held for good comes to 1). */
export function recentSlots(use: DecayedUse, halfLifeMs: number): number {
  return use.slotSeconds / meanLifeSeconds(halfLifeMs);
}

/** The level a waiting lease competes at: its priority plus the steps it has waited (0 with the step off). */
export function levelOf(lease: Pick<Candidate, 'since'>, now: number, stepMs: number): number {
  return stepMs === 0 ? 0 : Math.floor((now - lease.since.getTime()) / stepMs);
}

/**
 * A team's load against its weight once served: lower is served first
 * among equal levels. Counted with the slot it would get, as a finishing
 * time is: counted without, a team of small weight, whose load one slot
 * moves most, would be chosen at the low of each of its swings, and hold
 * more than its share.
 */
const load = (teams: ReadonlyMap<string, TeamUse>, team: string) => {
  const t = teams.get(team) ?? { weight: 1, use: 0, recent: 0, perHeld: 0 };
  return (t.recent + (t.use + 1) * t.perHeld) / t.weight;
};

/** The candidate served next (see above), or undefined when there is none. */
export function pickNext<C extends Candidate>(
  candidates: readonly C[],
  teams: ReadonlyMap<string, TeamUse>,
  now: number,
  stepMs: number,
): C | undefined {
  let best: C | undefined;
  for (const c of candidates) if (!best || before(c, best, teams, now, stepMs)) best = c;
  return best;
}

function before(a: Candidate, b: Candidate, teams: ReadonlyMap<string, TeamUse>, now: number, stepMs: number): boolean {
  const levels = levelOf(a, now, stepMs) - levelOf(b, now, stepMs);
  if (levels !== 0) return levels > 0;
  const loads = load(teams, a.team) - load(teams, b.team);
  if (loads !== 0) return loads < 0;
  const places = a.since.getTime() - b.since.getTime();
  return places !== 0 ? places < 0 : a.leaseId < b.leaseId;
}

/**
 * A team's share of `capacity` slots: its weight's part of the weights of
 * the teams competing for them (holding some, or waiting). Held over time,
 * not at each instant: a pool too small for the weights (4 slots, weights
 * 3:2:1) cannot hold 2, 1.3 and 0.7 at once.
 */
export function shareOf(teams: ReadonlyMap<string, TeamUse>, team: string, capacity: number): number {
  let total = 0;
  for (const t of teams.values()) total += t.weight;
  return total === 0 ? capacity : (capacity * (teams.get(team)?.weight ?? 0)) / total;
}

/**
 * Why a lease was chosen, as its grant records it: "priority 5; team ci's
 * share 2.4, held 1.8 lately (half-life 1h), holds 2 now; waited 41s".
 */
export function describeChoice(c: Candidate, teams: ReadonlyMap<string, TeamUse>, capacity: number, now: number, halfLifeMs: number): string {
  const share = shareOf(teams, c.team, capacity);
  const team = teams.get(c.team);
  const waited = Math.max(0, Math.round((now - c.requestedAt.getTime()) / 1000));
  return `priority ${c.priority}; team ${c.team}'s share ${oneDecimal(share)}, held ${oneDecimal(team?.recent ?? 0)} lately (half-life ${formatDuration(halfLifeMs)}), holds ${team?.use ?? 0} now; waited ${formatDuration(waited * 1000)}`;
}

const oneDecimal = (n: number) => Number(n.toFixed(1));
