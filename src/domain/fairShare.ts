import { formatDuration } from './durations.ts';

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
 * 2. among equal levels, the team whose use of the blueprint, measured
 *    against its weight, is lowest;
 * 3. then the earlier place, then the lower lease id.
 *
 * A team's first waiter has the highest level in its team (level rises
 * with the place), so comparing first waiters is comparing everyone. No
 * lease starves: its level rises by one every step it waits, while a new
 * request starts at its priority (at most 9), so after 9 steps at most the
 * leases requested after it stop going ahead of it; the teams that got
 * slots meanwhile have the higher use.
 */
export interface Candidate {
  readonly leaseId: number;
  readonly team: string;
  /** Its place in line. */
  readonly since: Date;
  readonly requestedAt: Date;
  readonly priority: number;
}

/** A team's weight and how many leases it has at the blueprint (holding slots, or sent to take one). */
export interface TeamUse {
  readonly weight: number;
  readonly use: number;
}

/** The level a waiting lease competes at: its priority plus the steps it has waited (0 with the step off). */
export function levelOf(lease: Pick<Candidate, 'since'>, now: number, stepMs: number): number {
  return stepMs === 0 ? 0 : Math.floor((now - lease.since.getTime()) / stepMs);
}

/** A team's use against its weight: lower is served first among equal levels. */
const load = (teams: ReadonlyMap<string, TeamUse>, team: string) => {
  const t = teams.get(team) ?? { weight: 1, use: 0 };
  return t.use / t.weight;
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
 * the teams competing for them (holding some, or waiting).
 */
export function shareOf(teams: ReadonlyMap<string, TeamUse>, team: string, capacity: number): number {
  let total = 0;
  for (const t of teams.values()) total += t.weight;
  return total === 0 ? capacity : (capacity * (teams.get(team)?.weight ?? 0)) / total;
}

/** Why a lease was chosen, as its grant records it: "priority 5; team ci holds 2 of its share of 6; waited 41 s". */
export function describeChoice(c: Candidate, teams: ReadonlyMap<string, TeamUse>, capacity: number, now: number): string {
  const share = shareOf(teams, c.team, capacity);
  const waited = Math.max(0, Math.round((now - c.requestedAt.getTime()) / 1000));
  return `priority ${c.priority}; team ${c.team} holds ${teams.get(c.team)?.use ?? 0} of its share of ${Number(share.toFixed(1))}; waited ${formatDuration(waited * 1000)}`;
}
