import { sql } from 'kysely';
import type { BlueprintRow, CommandRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import { executePrepared } from '../../db/PreparingClient.ts';
import { formatSelector, type Labels, matches, parseSelector, resourceLabels, type Selector } from '../../domain/labels.ts';
import { programDecidesLabels, unmatchedMadeFor, whyBlueprintNeverMatches } from '../../domain/programLabels.ts';
import { statesWith } from '../../domain/lifecycle.ts';
import { makeResource } from '../../objects/makeResource.ts';
import { slotsTaken } from '../../read/slotsTaken.ts';
import { type FollowUp, send } from '../messages.ts';
import { describeChoice, type LineCandidate, perHeld, pickNext, recentSlots, type TeamUse } from '../../domain/fairShare.ts';
import { describeQuota, type Quota, quotaReached } from '../../domain/quotas.ts';
import { perStep } from '../../db/perStep.ts';
import { waitingLeases } from '../../db/waitingLeases.ts';
import { readMadeForSelector } from '../../db/madeForSelector.ts';
import { countedAtBlueprint, countedOverall, countPromised, quotasFor } from '../../db/countedLeases.ts';
import { forgetRequestingLeases } from '../batchReads/requestingLease.ts';
import { readTeamUsage, writeTeamUsage } from '../../db/teamUsage.ts';
import { readPreemptions } from '../../db/preemptions.ts';
import { preemptionOf } from '../../domain/preemption.ts';
import { PreemptingLine } from './preemptingLine.ts';
import { ReservedRoom } from './reservedRoom.ts';
import { reservationWaiters } from '../sql/reservedSlots.ts';
import { reclaimForReservations } from './reservationReclaim.ts';

/**
 * A blueprint's waiting line: the leases that found no free slot. Each
 * team's part of it is in the order of its places (the request time less
 * what the lease's priority is worth, domain/priority.ts), and the first
 * waiters of the teams compete for each slot (domain/fairShare.ts). Its
 * invariant, which the blueprint's drain restores after every command it
 * applies (see blueprintHandlers.ts):
 *
 *   no lease waits while the blueprint has room for it, unless a quota of
 *   its team or holder holds it back (domain/quotas.ts).
 *
 * Room is a free slot on an active resource, not already promised to an
 * acquire on its way there, or, while the blueprint is enabled, a resource it
 * may still make (live below max). A resource made for a waiter has slots for
 * the waiters behind it too (leasesPerResource of them; a driver that gives
 * it fewer refuses the rest, who ask again). So whatever made the room (a
 * raised limit, an enable, a destroyed resource, a freed slot, new
 * settings), the waiters get it, and nobody has to remember to serve them.
 *
 * Only the blueprint's drain writes the line (blueprint_waiters); it serves a
 * lease by sending an `acquire` to a resource's queue, the resource decides.
 */
export interface Serving {
  /** The blueprint's resource count after the resources made here. */
  readonly liveResources: number;
  /** What happened to each lease served, for the command's message. */
  readonly served: ReadonlyMap<number, string>;
  /** How many leases still wait, the joining one included. */
  readonly waiting: LineCount;
  /** For a joining lease left waiting: how many wait ahead of it. */
  readonly joinedAhead: LineCount | undefined;
  /** Why they wait. */
  readonly why: string;
  /** Why the joining lease waits, when it is not the room's lack (a quota it is at). */
  readonly joinedWhy?: string;
  /** The quota `joinedWhy` names, when one holds the joining lease back (for its explanation, src/drain/explainLease.ts). */
  readonly joinedQuota?: { readonly quota: Quota; readonly count: number };
  readonly events: ReadonlyArray<{ type: string; message: string; data?: unknown }>;
  readonly followUps: readonly FollowUp[];
}

/**
 * A count of waiting leases, exact up to COUNT_CAP: a decision reads the
 * line only as far as it serves it, so what it costs does not grow with the
 * line (the web UI's lease and blueprint pages give the exact place).
 */
export interface LineCount {
  readonly n: number;
  /** True when there are more than `n`. */
  readonly orMore: boolean;
}

/** The commands after which a blueprint whose last reservation has ended looks at what it reclaimed: the window's end, a cancellation. */
const RECLAIM_SETTLED_BY: ReadonlySet<string> = new Set(['reservation_due', 'serve_waiters']);

/** The most waiting leases a decision counts for its message. */
const COUNT_CAP = 100;

/**
 * A lease coming to the line: it takes its place (`since`) by the time it
 * was requested less what its priority is worth (domain/priority.ts), as
 * if it had waited since then.
 */
export interface Joining {
  readonly leaseId: number;
  readonly since: Date;
  readonly requestedAt: Date;
  readonly priority: number;
  readonly team: string;
  readonly holder: string;
  /** What it needs of a resource's labels (none: any resource). */
  readonly selector?: Selector;
  /** The reservation it was created to use: served from it first while its window is open (decision 0045). */
  readonly reservationId?: number;
}

/** A row of the line as read: `key` is its place (`since` to the microsecond, as text) for reading on after it. */
interface LineRow {
  readonly lease_id: number;
  readonly since: Date;
  readonly key: string;
  readonly team: string;
  readonly holder: string;
  readonly state: string;
  readonly priority: number;
  readonly requested_at: Date;
  readonly selector: string | null;
  /** `selector` read, once, as the row is. */
  readonly needs: Selector | undefined;
}

/** A row as the line's reads answer it, its selector read. */
const withNeeds = <Row extends { readonly selector: string | null }>(row: Row): Row & { readonly needs: Selector | undefined } => ({
  ...row,
  needs: row.selector === null ? undefined : parseSelector(row.selector),
});

/** A lease that may be served next: the joining lease, or a row of the line. */
type Candidate = LineCandidate;

const candidateOf = (row: Pick<LineRow, 'lease_id' | 'team' | 'holder' | 'since' | 'requested_at' | 'priority' | 'needs'>): Candidate => ({
  leaseId: row.lease_id,
  team: row.team,
  holder: row.holder,
  since: row.since,
  requestedAt: row.requested_at,
  priority: row.priority,
  ...(row.needs === undefined ? {} : { selector: row.needs }),
});

/**
 * Whether `joining` comes before `row` in the line (since, then lease id);
 * microseconds past the millisecond do not matter here: leases created in
 * the same millisecond are ordered by id either way.
 */
const comesBefore = (joining: Joining, row: LineRow) =>
  joining.since.getTime() < row.since.getTime() || (joining.since.getTime() === row.since.getTime() && joining.leaseId < row.lease_id);

/**
 * Serves the line of `blueprint` (its row as the command being applied
 * leaves it) from whatever room it has, `joining` in its place among the
 * waiters. A joining lease served at once never has a row in the line; one
 * left waiting gets its row here.
 *
 * Each team's part of the line is read from its head, a few rows at a time
 * and only while there is room: a decision that serves nobody reads none of
 * it, and one that serves reads one index probe per team waiting, however
 * long the line (domain/fairShare.ts says which team's first waiter wins).
 * Rows of leases that left the line (released while they waited) are
 * removed as they are read; every other reader of the line passes over the
 * rest (see waitingLeases). A waiter whose team or holder is at a quota is
 * passed over, and stays in its place (domain/quotas.ts).
 */
export async function serveWaitingLine(trx: Db, blueprint: BlueprintRow, cause: CommandRow, joining?: Joining): Promise<Serving> {
  let live = blueprint.live_resources;
  const preemption = preemptionOf(blueprint.preemption);
  // Preemptions are read where the blueprint preempts, and where its settings changed (serve_waiters): turned off, those under way are withdrawn.
  const settling = preemption !== null || cause.kind === 'serve_waiters';
  const underWay = settling ? await readPreemptions(trx, blueprint.id) : [];
  /** The free slots left once the line was served (none read when nobody waits). */
  let freeLeft = () => 0;
  /** What reservations hold back from the line, if anything (reservedRoom.ts). */
  let held: () => string | undefined = () => undefined;
  const why = () => {
    const making =
      blueprint.state !== 'enabled'
        ? `blueprint ${blueprint.state}: it makes no resources`
        : live < blueprint.max_resources
          ? 'below its limit'
          : 'at its limit';
    // A slot left free with leases waiting is one none of them may take: saying "no free slot" then contradicts the slot just freed.
    const free = freeLeft();
    const room =
      free === 0
        ? 'no free slot'
        : held() !== undefined
          ? `${free} free slot(s)`
          : `${free} free slot(s), which no waiting lease may take: its selector does not match, or a quota holds it back`;
    const holding = held();
    return `${making}; ${live} of ${blueprint.max_resources} live, ${room}${holding ? `; ${holding}` : ''}`;
  };
  // Slots may have to be reclaimed for a reservation whose window is open, or those reclaimed given back (one ended or was cancelled).
  const mayReclaim = blueprint.reserved_until !== null && (blueprint.reserved_until.getTime() > Date.now() || RECLAIM_SETTLED_BY.has(cause.kind));
  // With nobody joining, no preemption to settle and nothing to reclaim, an empty line needs no room counted.
  if (!joining && underWay.length === 0 && !mayReclaim && !(await hasLineRows(trx, blueprint.id)))
    return {
      liveResources: live,
      served: new Map(),
      waiting: { n: 0, orMore: false },
      joinedAhead: undefined,
      why: why(),
      events: [],
      followUps: [],
    };

  const served = new Map<number, string>();
  const events: Serving['events'][number][] = [];
  const followUps: FollowUp[] = [];
  const sent = sentInStep(trx);
  const slots = await freeSlots(trx, blueprint, sent);
  freeLeft = () => slots.reduce((n, s) => n + Math.max(s.free, 0), 0);
  const mayMake = () => blueprint.state === 'enabled' && live < blueprint.max_resources;
  const hasRoom = () => slots.some((s) => s.free > 0) || mayMake();
  const mayMatch = newResourceMayMatch(trx, blueprint);
  const reserved = await ReservedRoom.read(trx, blueprint);
  held = () => reserved.describe();
  /** The slots the blueprint can still give: its free ones, and those of the resources it may still make. */
  const room = () => freeLeft() + (mayMake() ? (blueprint.max_resources - live) * blueprint.leases_per_resource : 0);
  /** Whether the line may have some of the room: more of it than the reservations hold back. */
  const lineHasRoom = () => hasRoom() && room() > reserved.heldBack();
  /** A free slot `selector` matches (a slot of a resource made in this decision has labels not known yet: only a lease without one takes it). */
  const slotFor = (selector: Selector | undefined) =>
    slots.find((s) => s.free > 0 && (selector === undefined || (s.labels !== undefined && matches(selector, s.labels))));
  /** Whether there is room for a lease: a slot its selector matches, or a resource the blueprint may make that may match it. */
  const fits = async (lease: Needing) =>
    slotFor(lease.selector) !== undefined || (mayMake() && (lease.selector === undefined || (await mayMatch(lease, lease.selector))));
  /** Serves one lease from the room left (`at`: that slot), making a resource if it may; `why` it was chosen over others, if it was. */
  const serve = async (lease: Candidate, why?: string, at?: Slot) => {
    const leaseId = lease.leaseId;
    let slot = at ?? slotFor(lease.selector);
    if (!slot && mayMake()) {
      const selector = lease.selector && formatSelector(lease.selector);
      slot = {
        id: await makeResource(trx, blueprint, cause, { leaseId, selector }),
        free: blueprint.leases_per_resource,
        madeFor: leaseId,
        labels: undefined,
      };
      slots.push(slot);
      live++;
      events.push({ type: 'resource_allocated', message: `resource ${slot.id} for lease ${leaseId}`, data: { resourceId: slot.id, leaseId } });
    }
    if (!slot) return;
    slot.free--;
    sent.set(leaseId, slot.id);
    countPromised(trx, { team: lease.team, holder: lease.holder, blueprintId: blueprint.id });
    const made = slot.madeFor === leaseId;
    const count = `${live} of ${blueprint.max_resources}`;
    served.set(
      leaseId,
      made
        ? `allocating resource ${slot.id} for lease ${leaseId} (${why ? `${count}; ${why}` : count})`
        : `sent lease ${leaseId} to resource ${slot.id}${why ? ` (${why})` : ''}`,
    );
    const reason = made
      ? `made for lease ${leaseId}${why ? ` (${why})` : ''}`
      : why
        ? `lease ${leaseId} chosen for a slot: ${why}`
        : `lease ${leaseId} asked for a slot`;
    followUps.push(send.resource.acquire(slot.id, { leaseId }, reason));
  };

  const departed: number[] = [];
  const servedRows: number[] = [];
  let joinedHasRow = false;
  let joinedWhy: string | undefined;
  let joinedQuota: Serving['joinedQuota'];
  let competition: Competition | undefined;
  /** What the decision weighs, read once, when it is first needed (a decision with no room to give reads none). */
  const weigh = async () => (competition ??= await readCompetition(trx, blueprint, joining, preemption !== null));

  // A preempted lease's slot goes to the lease it was taken for, ahead of the line, if its quotas still allow it.
  const preempting = preemption !== null || underWay.length > 0 ? new PreemptingLine(trx, blueprint, preemption, underWay) : undefined;
  for (const p of preempting?.freed ?? []) {
    const slot = slots.find((s) => s.id === p.resourceId && s.free > 0);
    if (!slot) {
      preempting!.stillFreeing(p);
      continue;
    }
    const lease = p.forLease;
    const weighing = await weigh();
    const block = weighing.describeBlock(lease);
    if (block !== undefined) {
      preempting!.heldBack(p, block);
      continue;
    }
    await serve(lease, `the slot of lease ${p.victimLeaseId}, ${p.reason}`, slot);
    weighing.count(lease);
    servedRows.push(lease.leaseId);
    preempting!.served(p);
  }

  let newcomer: Candidate | undefined = joining;
  // During a reservation's window its leases are served from it first, ahead of the line (decision 0045).
  const wanting = hasRoom() ? reserved.wanting : [];
  const reservationRows = await reservationWaiters(
    trx,
    blueprint.id,
    wanting.map((r) => ({ id: r.id, limit: reserved.unused(r.id) + HEAD_ROWS })),
  );
  for (const r of wanting) {
    if (!hasRoom()) break;
    const waiters = reservationRows
      .filter((w) => w.reservation_id === r.id && w.lease_id !== joining?.leaseId && !served.has(w.lease_id))
      .map((w) => candidateOf(withNeeds(w)));
    if (newcomer !== undefined && joining?.reservationId === r.id) waiters.push(newcomer);
    waiters.sort((a, b) => a.since.getTime() - b.since.getTime() || a.leaseId - b.leaseId);
    for (const lease of waiters) {
      if (reserved.unused(r.id) === 0 || !hasRoom()) break;
      const weighing = await weigh();
      if (weighing.blocks(lease) || !(await fits(lease))) continue;
      await serve(lease, `from reservation ${r.id}, ahead of the line`);
      weighing.count(lease);
      reserved.served(r.id);
      servedRows.push(lease.leaseId);
      if (lease === newcomer) newcomer = undefined;
    }
  }
  // A lease served may have a resource being made for it now: a request after this decision reads it again.
  if (served.size > 0) forgetRequestingLeases(trx);
  if (hasRoom()) {
    const now = Date.now();
    const competition = await weigh();
    const lines = competition.lines;
    // Every candidate below is weighed against the room as it stands here, beyond what the reservations hold back.
    while (lineHasRoom()) {
      const candidates: Candidate[] = [];
      for (const line of lines.values()) {
        if (competition.blocks({ team: line.team, holder: undefined })) continue;
        const row = await line.head(async (r) => {
          if (r.lease_id === joining?.leaseId) {
            // A lease asking again (after a refusal) may already have its row.
            joinedHasRow = true;
            return 'skip';
          }
          if (r.state !== 'pending') {
            departed.push(r.lease_id);
            return 'skip';
          }
          // Served in this decision already: a preempted lease's slot.
          if (served.has(r.lease_id)) return 'skip';
          return competition.blocks(r) || !(await fits(candidateOf(r))) ? 'pass' : 'take';
        });
        if (newcomer?.team === line.team && !competition.blocks(newcomer) && (await fits(newcomer)) && (!row || comesBefore(joining!, row)))
          candidates.push(newcomer);
        else if (row) candidates.push(candidateOf(row));
      }
      const chosen = pickNext(candidates, competition.uses, now, blueprint.priority_step_ms);
      if (!chosen) break;
      // A lease that asked with nobody else in line was served, not chosen.
      const alone = chosen === newcomer && candidates.length === 1 && competition.lineWasEmpty;
      await serve(chosen, alone ? undefined : describeChoice(chosen, competition.uses, competition.capacity, now, blueprint.fair_share_half_life_ms));
      competition.count(chosen);
      if (chosen === newcomer) newcomer = undefined;
      else {
        servedRows.push(chosen.leaseId);
        lines.get(chosen.team)!.take();
      }
    }
    if (served.size > 0) forgetRequestingLeases(trx);
    if (newcomer) {
      joinedQuota = competition.blockOf(newcomer);
      joinedWhy =
        competition.describeBlock(newcomer) ??
        (newcomer.selector && !(await fits(newcomer)) ? noMatch(newcomer.selector) : undefined) ??
        (lineHasRoom() ? undefined : reserved.describe());
    }
  }

  // Nothing to preempt for, nor to settle, when the lease that asked at an empty line was served (the common request).
  const nobodyWaits = competition?.lineWasEmpty === true && newcomer === undefined && underWay.length === 0;
  if (preempting && !nobodyWaits) {
    const weighing = await weigh();
    const waiting = [
      ...(newcomer ? [newcomer] : []),
      // A lease asking again may have its row too: it is the newcomer.
      ...weighing.heads.filter((r) => r.state === 'pending' && !served.has(r.lease_id) && r.lease_id !== joining?.leaseId).map(candidateOf),
    ];
    await preempting.decide(waiting, new Set(served.keys()), weighing, new Date());
    events.push(...preempting.events);
    followUps.push(...preempting.followUps);
    if (joining) joinedWhy = preempting.whyWaiting.get(joining.leaseId) ?? joinedWhy;
  }

  if (mayReclaim) {
    const reclaiming = await reclaimForReservations(trx, blueprint, reserved, room(), new Date());
    events.push(...reclaiming.events);
    followUps.push(...reclaiming.followUps);
  }

  const leaving = [...departed, ...servedRows, ...(joining && served.has(joining.leaseId) && joinedHasRow ? [joining.leaseId] : [])];
  if (leaving.length > 0) await trx.deleteFrom('blueprint_waiters').where('lease_id', 'in', leaving).execute();
  const joinedWaits = joining !== undefined && !served.has(joining.leaseId);
  if (joinedWaits) {
    await trx
      .insertInto('blueprint_waiters')
      .values({ blueprint_id: blueprint.id, lease_id: joining.leaseId, since: joining.since, team: joining.team, why: joinedWhy ?? why() })
      .onConflict((oc) => oc.column('lease_id').doNothing())
      .execute();
  }
  // A line that was empty holds at most the joining lease now: nothing to count (the common request, served at once, keeps to its reads).
  /** Read with the competition: no row in the line (every waiter's team has a row in `teams`, which its lease's key holds). */
  const lineWasEmpty = competition?.lineWasEmpty ?? false;
  const joinedAhead = joinedWaits ? (lineWasEmpty ? { n: 0, orMore: false } : await countAhead(trx, blueprint.id, joining)) : undefined;
  const waiting = lineWasEmpty ? { n: joinedWaits ? 1 : 0, orMore: false } : await countWaiting(trx, blueprint.id);
  await competition?.record(waiting.n === 0);
  return {
    liveResources: live,
    served,
    waiting,
    joinedAhead,
    why: why(),
    ...(joinedWhy ? { joinedWhy } : {}),
    ...(joinedQuota ? { joinedQuota } : {}),
    events,
    followUps,
  };
}

/**
 * What a decision that has room weighs (domain/fairShare.ts,
 * domain/quotas.ts): each waiting team's part of the line, each competing
 * team's weight and use of the blueprint, and the quotas that may hold a
 * waiter back with what they count; kept up to date as the decision
 * serves.
 */
interface Competition {
  readonly lines: ReadonlyMap<string, TeamLine>;
  /** The first rows of each team's part of the line, as the decision began (the waiters that may preempt). */
  readonly heads: readonly LineRow[];
  readonly uses: ReadonlyMap<string, TeamUse>;
  /** Slots the blueprint has at its limit, which the teams share. */
  readonly capacity: number;
  /** No row in the line when the decision began. */
  readonly lineWasEmpty: boolean;
  /**
   * Whether a quota keeps a lease of `team` (and `holder`; undefined: any
   * holder of it) from being served now, with `promised` counted too
   * (leases that preemptions under way will grant).
   */
  blocks(lease: { team: string; holder: string | undefined }, promised?: readonly { team: string; holder: string }[]): boolean;
  /** The quota a lease is at, with what it counts. */
  blockOf(lease: { team: string; holder: string }): { quota: Quota; count: number } | undefined;
  /** Why a lease waits although there is room: the quota it is at. */
  describeBlock(lease: { team: string; holder: string }): string | undefined;
  /** Counts a lease just served. */
  count(lease: { team: string; holder: string }): void;
  /** Writes what the teams used up to the decision, and the grants it made (src/db/teamUsage.ts); `lineLeftEmpty`: nobody waits after it. */
  record(lineLeftEmpty: boolean): Promise<void>;
}

/** `full`: weigh the teams even for a lease alone at an empty line (preemption weighs the teams that hold slots). */
async function readCompetition(trx: Db, blueprint: BlueprintRow, joining: Joining | undefined, full: boolean): Promise<Competition> {
  // One after the other: a step's reads share its transaction's connection.
  const quotas = await quotasFor(trx, blueprint.id);
  const heads = await teamHeads(trx, blueprint.id);
  // A lease asking at an empty line has nobody to be weighed against: with
  // no quota to mind either, it is served without counting anything, and the
  // most common decision keeps to two reads.
  const lineWasEmpty = heads.length === 0;
  const alone = lineWasEmpty && !full;
  const atBlueprint = alone && quotas.length === 0 ? [] : await countedAtBlueprint(trx, blueprint.id);
  const lines = new Map<string, TeamLine>();
  for (const row of heads) {
    const line = lines.get(row.team) ?? new TeamLine(row.team, (after) => teamPage(trx, blueprint.id, row.team, after));
    lines.set(row.team, line);
    line.add(row);
  }
  for (const line of lines.values()) line.readAhead(HEAD_ROWS);
  if (joining && !lines.has(joining.team)) lines.set(joining.team, new TeamLine(joining.team, async () => [], true));
  const overallTeams = [...new Set(quotas.filter((q) => q.blueprintId === null && lines.has(q.team)).map((q) => q.team))];
  const overall = overallTeams.length > 0 ? await countedOverall(trx, overallTeams) : [];
  const competing = new Set([...lines.keys(), ...atBlueprint.map((c) => c.team)]);
  const held = new Map<string, number>();
  for (const c of atBlueprint) held.set(c.team, (held.get(c.team) ?? 0) + c.n);
  // Weights and use weigh candidates against each other; alone, there are none to weigh, nor any grant to count in.
  const usage = alone
    ? { at: new Date(), teams: [...competing].map((team) => ({ team, weight: 1, slotSeconds: 0, grants: 0 })) }
    : await readTeamUsage(trx, blueprint, [...competing], (team) => held.get(team) ?? 0);
  const halfLife = blueprint.fair_share_half_life_ms;
  const eachHeld = perHeld(usage.teams, halfLife);
  // A team read only to count its time (it held slots at the last decision, none now, and does not wait) does not compete.
  const uses = new Map(
    usage.teams
      .filter((t) => competing.has(t.team))
      .map((t) => [t.team, { weight: t.weight, use: held.get(t.team) ?? 0, recent: recentSlots(t, halfLife), perHeld: eachHeld }]),
  );
  const granted = new Map<string, number>();
  const countedFor = (q: Quota) => (q.blueprintId === null ? overall : atBlueprint);
  const reached = (lease: { team: string; holder: string | undefined }, promised: readonly { team: string; holder: string }[] = []) =>
    quotaReached(
      lease.holder === undefined ? quotas.filter((q) => q.holder === null) : quotas,
      promised.length === 0 ? countedFor : (q) => [...countedFor(q), ...promised.map((p) => ({ ...p, blueprintId: blueprint.id, n: 1 }))],
      { team: lease.team, holder: lease.holder ?? '', blueprintId: blueprint.id },
    );
  return {
    lines,
    heads,
    uses,
    capacity: blueprint.max_resources * blueprint.leases_per_resource,
    lineWasEmpty,
    blocks: (lease, promised) => reached(lease, promised) !== undefined,
    blockOf: (lease) => reached(lease),
    describeBlock(lease) {
      const hit = reached(lease);
      return hit && `${describeQuota(hit.quota, () => blueprint.name)} is reached (${hit.count} counted)`;
    },
    count(lease) {
      const one = { team: lease.team, holder: lease.holder, blueprintId: blueprint.id, n: 1 };
      atBlueprint.push(one);
      if (overallTeams.includes(lease.team)) overall.push(one);
      uses.get(lease.team)!.use++;
      granted.set(lease.team, (granted.get(lease.team) ?? 0) + 1);
    },
    async record(lineLeftEmpty) {
      if (alone) return;
      await writeTeamUsage(
        trx,
        blueprint.id,
        usage.at,
        usage.teams.map((t) => ({
          team: t.team,
          slotSeconds: t.slotSeconds,
          grants: t.grants + (granted.get(t.team) ?? 0),
          held: lineLeftEmpty ? null : (uses.get(t.team)?.use ?? 0),
        })),
      );
    },
  };
}

/** The rows each team's read of its part of the line starts with (more are read as they are served or passed over). */
const HEAD_ROWS = 2;
/** How many rows a team's later reads take. */
const PAGE = 16;
/**
 * How many of a team's rows a decision passes over (their holders at a
 * quota) before it counts the team as held back too: a holder at its quota
 * with a long line of its own would otherwise cost every decision a read
 * of all of it (docs/known-limits.md).
 */
const PASS_OVER_LIMIT = 256;

/**
 * One team's part of the line, read from its head: `head` answers the first
 * row the decision may serve, passing over rows that `judge` says to skip
 * (gone from the line) or pass (held back, kept in place).
 */
class TeamLine {
  private readonly rows: LineRow[] = [];
  private pos = 0;
  private passed = 0;
  private last: LineRow | undefined;
  constructor(
    readonly team: string,
    private readonly read: (after: LineRow | undefined) => Promise<LineRow[]>,
    private endReached = false,
  ) {}

  add(row: LineRow): void {
    this.rows.push(row);
    this.last = row;
  }

  /** After the first read: fewer rows than asked for means the team's line ended. */
  readAhead(asked: number): void {
    if (this.rows.length < asked) this.endReached = true;
  }

  async head(judge: (row: LineRow) => Promise<'skip' | 'pass' | 'take'>): Promise<LineRow | undefined> {
    for (;;) {
      if (this.pos === this.rows.length) {
        if (this.endReached || this.passed >= PASS_OVER_LIMIT) return undefined;
        const page = await this.read(this.last);
        if (page.length < PAGE) this.endReached = true;
        for (const row of page) this.add(row);
        continue;
      }
      const row = this.rows[this.pos]!;
      const verdict = await judge(row);
      if (verdict === 'take') return row;
      if (verdict === 'pass') this.passed++;
      this.pos++;
    }
  }

  /** The head was served. */
  take(): void {
    this.pos++;
  }
}

const LINE_COLUMNS = [
  'w.lease_id',
  'w.since',
  sql<string>`w.since::text`.as('key'),
  'w.team',
  'l.holder',
  'l.state',
  'l.priority',
  'l.created_at as requested_at',
  'l.selector',
] as const;

/** Whether the blueprint's line has any row (a lease that left it included: serving removes it). */
async function hasLineRows(trx: Db, blueprintId: number): Promise<boolean> {
  const row = await trx.selectFrom('blueprint_waiters').select('lease_id').where('blueprint_id', '=', blueprintId).limit(1).executeTakeFirst();
  return row !== undefined;
}

/**
 * The first HEAD_ROWS rows of each team's part of the line: one probe of
 * blueprint_waiters_by_team per team. Prepared, as freeSlots: each request
 * for a slot reads both; their parameters are keys and counts, their
 * constants (freeSlots' states) literals.
 */
function teamHeads(trx: Db, blueprintId: number): Promise<LineRow[]> {
  const query = trx
    .selectFrom('teams as t')
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('blueprint_waiters as w')
          .innerJoin('leases as l', 'l.id', 'w.lease_id')
          .select(LINE_COLUMNS)
          .where('w.blueprint_id', '=', blueprintId)
          .whereRef('w.team', '=', 't.name')
          .orderBy('w.since')
          .orderBy('w.lease_id')
          .limit(HEAD_ROWS)
          .as('h'),
      (join) => join.onTrue(),
    )
    .selectAll('h');
  return executePrepared(trx, query).then((rows) => rows.map(withNeeds));
}

/** A team's rows after `after`, in the order of their places. */
function teamPage(trx: Db, blueprintId: number, team: string, after: LineRow | undefined): Promise<LineRow[]> {
  return trx
    .selectFrom('blueprint_waiters as w')
    .innerJoin('leases as l', 'l.id', 'w.lease_id')
    .select(LINE_COLUMNS)
    .where('w.blueprint_id', '=', blueprintId)
    .where('w.team', '=', team)
    .$if(after !== undefined, (qb) => qb.where(sql<boolean>`(w.since, w.lease_id) > (${after!.key}::timestamptz, ${after!.lease_id}::bigint)`))
    .orderBy('w.since')
    .orderBy('w.lease_id')
    .limit(PAGE)
    .execute()
    .then((rows) => rows.map(withNeeds));
}

/** How many leases wait at the blueprint, counted up to COUNT_CAP. */
async function countWaiting(trx: Db, blueprintId: number): Promise<LineCount> {
  const rows = await waitingLeases(trx)
    .select('w.lease_id')
    .where('w.blueprint_id', '=', blueprintId)
    .limit(COUNT_CAP + 1)
    .execute();
  return rows.length > COUNT_CAP ? { n: COUNT_CAP, orMore: true } : { n: rows.length, orMore: false };
}

/** How many leases wait at the blueprint ahead of `joining`, counted up to COUNT_CAP. */
async function countAhead(trx: Db, blueprintId: number, joining: Joining): Promise<LineCount> {
  const ahead = await waitingLeases(trx)
    .select('w.lease_id')
    .where('w.blueprint_id', '=', blueprintId)
    .where(sql<boolean>`(w.since, w.lease_id) < (${joining.since.toISOString()}::timestamptz, ${joining.leaseId}::bigint)`)
    .limit(COUNT_CAP + 1)
    .execute();
  return ahead.length > COUNT_CAP ? { n: COUNT_CAP, orMore: true } : { n: ahead.length, orMore: false };
}

/** A resource the line may be sent to, and how many of its slots are still unpromised. */
interface Slot {
  readonly id: number;
  free: number;
  /** Its labels (the blueprint's over its driver's); undefined for one made here, whose driver has not reported yet. */
  readonly labels: Labels | undefined;
  /** The lease a resource was made for here. */
  readonly madeFor?: number;
}

/** Why a lease with a selector waits while the blueprint has room for others. */
export const noMatch = (selector: Selector) => `no free slot, and no resource it may make, matches its selector ${formatSelector(selector)}`;

/** A lease the line may serve, as `fits` judges it. */
type Needing = Pick<Candidate, 'leaseId' | 'selector' | 'requestedAt'>;

/**
 * Whether a resource the blueprint would make for a lease may match its
 * selector: its labels are the blueprint's over what its driver may report
 * (`possible_labels`); where its program decides them, not once the
 * resources it made for the selector came back not matching it
 * (unmatchedMadeFor, decision 0038), so a lease makes at most one resource
 * it is not known to match. Those are read once per lease and decision,
 * and only for a lease the line would make a resource for.
 */
function newResourceMayMatch(trx: Db, blueprint: BlueprintRow): (lease: Needing, selector: Selector) => Promise<boolean> {
  const judged = new Map<number, boolean>();
  return async (lease, selector) => {
    let may = judged.get(lease.leaseId);
    if (may === undefined) {
      may =
        whyBlueprintNeverMatches(blueprint, selector) === undefined &&
        (!programDecidesLabels(blueprint) ||
          unmatchedMadeFor(
            blueprint,
            selector,
            lease.requestedAt,
            await readMadeForSelector(trx, blueprint.id, formatSelector(selector), lease.requestedAt),
          ).length === 0);
      judged.set(lease.leaseId, may);
    }
    return may;
  };
}

/**
 * The leases this step's decisions sent to resources, and where: their
 * acquires are not written until the step commits, so a run of the
 * blueprint's decisions counts from this the slots it has promised (not
 * to promise one twice), and a lease's request is not served twice.
 */
const sentInStep = perStep(() => new Map<number, number>());

/** The resource a decision of this step sent `leaseId` to, if one did. */
export function servedInStep(trx: Db, leaseId: number): number | undefined {
  return sentInStep(trx).get(leaseId);
}

/**
 * The blueprint's resources that grant slots (active ones) with free slots (their slot rows counted), less the slots already
 * promised to acquires still in their queues (a resource whose acquire finds
 * its lease gone offers the slot to the line again) and to those this step
 * sent a lease to (`sent`).
 */
async function freeSlots(trx: Db, blueprint: BlueprintRow, sent: ReadonlyMap<number, number>): Promise<Slot[]> {
  const promised = new Map<number, number>();
  for (const resourceId of sent.values()) promised.set(resourceId, (promised.get(resourceId) ?? 0) + 1);
  const query = trx
    .selectFrom('resources as r')
    .select([
      'r.id',
      'r.labels',
      sql<number>`r.capacity - ${slotsTaken('r')} - (
        select count(*) from commands c
        where c.target_kind = 'resource' and c.target_id = r.id and c.kind = 'acquire' and c.status in ('queued', 'running'))::int`.as('free'),
    ])
    .where('r.blueprint_id', '=', blueprint.id)
    .where(
      'r.state',
      'in',
      statesWith('resource', 'grantsSlots').map((state) => sql.lit(state)),
    )
    .orderBy('r.id');
  return (await executePrepared(trx, query))
    .map((r) => ({ id: r.id, free: r.free - (promised.get(r.id) ?? 0), labels: resourceLabels(r.labels, blueprint.labels) }))
    .filter((r) => r.free > 0);
}
