import { type ControlledTransaction, sql } from 'kysely';
import type { BlueprintRow, CommandRow, DB, LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { readPreemptions } from '../db/preemptions.ts';
import { type Actor, systemActorName } from '../domain/Actor.ts';
import { formatDuration } from '../domain/durations.ts';
import type { AtBlueprint, Explanation, Reason, ReasonKind } from '../domain/explanation.ts';
import { describeZodIssues, InvalidInputError } from '../domain/errors.ts';
import { parseSelector, type Selector } from '../domain/labels.ts';
import { statesWith } from '../domain/lifecycle.ts';
import { preemptionOf } from '../domain/preemption.ts';
import { PRIORITY_RANGE, placeInLine } from '../domain/priority.ts';
import { describeScope, type Quota } from '../domain/quotas.ts';
import { formatTime } from '../domain/times.ts';
import { blueprintsFor, chooseBlueprint } from '../objects/chooseBlueprint.ts';
import { createLease } from '../objects/createLease.ts';
import { LeaseInputSchema, type LeaseInput } from '../objects/leaseInput.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { lockObjectInTransaction } from '../queue/lockObjectInTransaction.ts';
import { findBlueprint } from '../read/blueprints.ts';
import { findLease } from '../read/leases.ts';
import { readRequestingLease } from './batchReads/requestingLease.ts';
import { reservationBlueprintId } from '../objects/reservations.ts';
import { noMatch, type Serving, serveWaitingLine } from './handlers/waitingLine.ts';

/**
 * Why a lease waits, or would wait, and the smallest change that would
 * grant it now (docs/scheduling.md, "Why is my lease waiting?"; decision
 * 0044). Nothing here decides: each answer is what the blueprint's own
 * decision (serveWaitingLine) does with the lease, run in a transaction that
 * is always rolled back, holding the blueprint's lock as an operator's
 * change does, so the explanation cannot drift from the decision. Each
 * what-if is that decision again on a savepoint with one thing changed (a
 * quota, the blueprint's limit, the lease's priority, ...).
 *
 * A rolled-back run leaves nothing: its writes are rows (the line, the
 * resources it would make, their commands), its wake-ups run only after a
 * commit (afterCommit), a NOTIFY is sent only at a commit, and what a step
 * keeps (perStep) is keyed by the transaction, which each savepoint's is.
 */

const ASKING_AGAIN: Actor = { issuedBy: systemActorName('lease'), source: 'system' };

/** The most blueprints a dry run of a request by selector alone tries. */
const MAX_BLUEPRINTS = 5;
/** The most changes a chain of what-ifs applies one after another (each reveals the reason behind the one it lifted). */
const MAX_CHAIN = 3;
/**
 * The most leases ahead of it a capacity what-if has the decision serve
 * before the lease: one with more is not run (serving each costs the
 * decision a read), and its change is counted from the lease's place in
 * line instead, the chain ending there.
 */
const MAX_SERVED_BY_WHAT_IF = 20;

/** `slipway lease explain`, `GET /v1/leases/{id}/explanation`, the lease page's section. */
export async function explainLease(db: Db, leaseId: number): Promise<Explanation> {
  const lease = await findLease(db, leaseId);
  // In the order of the API's Explanation, so the CLI prints it alike both ways.
  const answer = (grantedNow: boolean, summary: string, blueprints: AtBlueprint[]): Explanation => ({
    lease: leaseId,
    state: lease.state,
    grantedNow,
    goesTo: lease.blueprint_name,
    summary,
    blueprints,
  });
  if (lease.state !== 'pending') return answer(false, `lease ${leaseId} is ${lease.state}: it waits for nothing`, []);
  return inRolledBack(db, async (trx) => {
    const blueprint = await lockedBlueprint(trx, lease.blueprint_id);
    const asking = await readRequestingLease(trx, leaseId);
    const onItsWay =
      asking?.making != null
        ? `resource ${asking.making} is being made for it`
        : asking?.sentTo != null
          ? `it was sent to resource ${asking.sentTo}, which answers next`
          : asking?.holding != null
            ? `it holds a slot on resource ${asking.holding}, being granted`
            : undefined;
    if (onItsWay) return answer(true, `lease ${leaseId} is on its way: ${onItsWay}`, []);
    // The lease asks again, as its drain does after a refusal.
    const { command } = await appendInTransaction(
      trx,
      { target: { kind: 'blueprint', id: blueprint.id }, kind: 'need_resource', payload: { leaseId }, actor: ASKING_AGAIN },
      { fromOutside: false, wake: false },
    );
    const at = await explainAt(trx, blueprint, command, askingOf(lease));
    return answer(at.grantedNow, summaryOf(`lease ${leaseId}`, [at]), [at]);
  });
}

/**
 * `slipway lease create --dry-run`, `POST /v1/leases?dryRun=true`: the
 * request made (createLease's own path) and decided at each blueprint it may
 * go to, then rolled back. A request createLease refuses is refused alike.
 */
export async function dryRunLease(db: Db, input: LeaseInput, actor: Actor): Promise<Explanation> {
  const parsed = LeaseInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid lease: ${describeZodIssues(parsed.error.issues)}`);
  const { selector, reservation } = parsed.data;
  return inRolledBack(db, async (trx) => {
    // A request that names only a reservation goes to the reservation's blueprint.
    const named = parsed.data.blueprint ?? (reservation === undefined ? undefined : await reservationBlueprintId(trx, reservation));
    const chosen = named === undefined ? await chooseBlueprint(trx, selector!) : undefined;
    // The one it goes to first, then the others it may go to.
    const targets =
      named === undefined
        ? (await blueprintsFor(trx, selector!)).candidates
            .sort((a, b) => Number(b.id === chosen!.id) - Number(a.id === chosen!.id))
            .slice(0, MAX_BLUEPRINTS)
        : [await findBlueprint(trx, named)];
    const blueprints: AtBlueprint[] = [];
    for (const target of targets) {
      blueprints.push(
        await inSavepoint(trx, async (sp) => {
          const blueprint = await lockedBlueprint(sp, target.id);
          const { lease, command } = await createLease(sp, { ...input, blueprint: blueprint.id }, actor);
          return explainAt(sp, blueprint, command, askingOf(lease));
        }),
      );
    }
    const first = blueprints[0]!;
    const goesTo = first.blueprint;
    return {
      lease: null,
      state: 'not requested',
      grantedNow: first.grantedNow,
      goesTo,
      summary: `${summaryOf('the request', [first])}${chosen ? `; ${chosen.why}` : ''}`,
      blueprints,
    };
  });
}

/** A lease as the line serves it. */
interface Asking {
  readonly id: number;
  readonly team: string;
  readonly holder: string;
  readonly priority: number;
  readonly requestedAt: Date;
  readonly selector: Selector | undefined;
  readonly reservationId: number | null;
}

function askingOf(lease: Pick<LeaseRow, 'id' | 'team' | 'holder' | 'priority' | 'created_at' | 'selector' | 'reservation_id'>): Asking {
  return {
    id: lease.id,
    team: lease.team,
    holder: lease.holder,
    priority: lease.priority,
    requestedAt: lease.created_at,
    selector: lease.selector === null ? undefined : parseSelector(lease.selector),
    reservationId: lease.reservation_id,
  };
}

/** What the decision did with the lease. */
type Verdict =
  | { readonly kind: 'served'; readonly where: string }
  | { readonly kind: 'preempting'; readonly victim: number; readonly message: string }
  | { readonly kind: 'waits'; readonly serving: Serving };

/** Granted now, or a slot taken back for it now. */
const grants = (verdict: Verdict) => verdict.kind !== 'waits';

type WhatIf = (sp: Db, blueprint: BlueprintRow, lease: Asking) => Promise<{ blueprint: BlueprintRow; lease: Asking }>;

/** The explanation at one blueprint: the decision, each reason it gives, and the what-ifs that lift them. */
async function explainAt(trx: Savepointing, blueprint: BlueprintRow, cause: CommandRow, lease: Asking): Promise<AtBlueprint> {
  const decide = (changes: readonly WhatIf[]) =>
    inSavepoint(trx, async (sp) => {
      let b = blueprint;
      let l = lease;
      for (const change of changes) ({ blueprint: b, lease: l } = await change(sp, b, l));
      return { verdict: verdictOf(await serveWaitingLine(sp, b, cause, joiningOf(b, l)), l.id), blueprint: b };
    });
  const { verdict: first } = await decide([]);
  const name = blueprint.name;
  if (first.kind === 'served') return { blueprint: name, grantedNow: true, where: first.where, reasons: [] };
  const reasons: Reason[] = [];
  // Only a blueprint that preempts has preemptions under way (turning it off withdraws them).
  const underWay = blueprint.preemption === null ? undefined : (await readPreemptions(trx, blueprint.id)).find((p) => p.forLeaseId === lease.id);
  if (underWay)
    reasons.push({
      kind: 'preemption',
      says: `lease ${underWay.victimLeaseId} is being preempted for it: ${underWay.reason}`,
      change: `none: its slot on resource ${underWay.resourceId} is this lease's once it ends, by ${formatTime(underWay.endsBy)}`,
    });
  if (first.kind === 'preempting')
    reasons.push({
      kind: 'preemption',
      says: `the blueprint preempts lease ${first.victim} for it (${first.message})`,
      change: "none: its slot is this lease's once it ends",
    });
  if (first.kind !== 'waits') return { blueprint: name, grantedNow: false, where: null, reasons };

  // The chain: each reason's change, applied on top of those before it, until the decision grants the lease or the reasons run out.
  const applied: WhatIf[] = [];
  const tried = new Set<ReasonKind>();
  let now: { verdict: Verdict; blueprint: BlueprintRow } = { verdict: first, blueprint };
  for (let i = 0; i < MAX_CHAIN && now.verdict.kind === 'waits'; i++) {
    const step = await nextStep(trx, now.blueprint, now.verdict.serving, lease, tried);
    if (!step) break;
    tried.add(step.kind);
    if (!step.whatIf) {
      reasons.push({ kind: step.kind, says: step.says, change: step.change ?? null });
      break;
    }
    applied.push(step.whatIf);
    now = await decide(applied);
    reasons.push({
      kind: step.kind,
      says: step.says,
      change: grants(now.verdict) ? `${step.change} would grant it` : `${step.change}, and the next reason lifted`,
    });
  }
  const others = chosenInstead(first.serving, lease.id);
  reasons.push(...others);
  // Priority decides who gets the room there is, or whom the blueprint preempts for: with neither, no priority grants it now.
  if (others.length > 0 || blueprint.preemption !== null) {
    const priority = await lowestPriority(trx, lease, async (p) => (await decide([withPriority(p)])).verdict, blueprint);
    if (priority) reasons.push(priority);
  }
  reasons.push(...(await slotsAhead(trx, blueprint, lease, first.serving)));
  return { blueprint: name, grantedNow: false, where: null, reasons };
}

/** The lease at another priority: its row, and its place in the line (domain/priority.ts). */
const withPriority =
  (priority: number): WhatIf =>
  async (sp, b, l) => {
    await sp.updateTable('leases').set({ priority }).where('id', '=', l.id).execute();
    await sp
      .updateTable('blueprint_waiters')
      .set({ since: placeInLine(l.requestedAt, priority, b.priority_step_ms) })
      .where('lease_id', '=', l.id)
      .execute();
    return { blueprint: b, lease: { ...l, priority } };
  };

/** The next reason a waiting lease's decision gives (one not lifted already), and the what-if that would lift it. */
async function nextStep(
  trx: Db,
  blueprint: BlueprintRow,
  serving: Serving,
  lease: Asking,
  tried: ReadonlySet<ReasonKind>,
): Promise<{ kind: ReasonKind; says: string; change?: string; whatIf?: WhatIf } | undefined> {
  if (serving.joinedQuota) {
    const { quota, count } = serving.joinedQuota;
    const scope = describeScope(quota, () => blueprint.name);
    return {
      kind: 'quota',
      says: `the quota of ${scope} is reached: ${count} of ${quota.maxLeases} counted (its leases holding or sent to a slot)`,
      change: `the quota of ${scope} at ${count + 1} (it is ${quota.maxLeases})`,
      whatIf: raiseQuota(quota, count + 1),
    };
  }
  if (lease.selector && serving.joinedWhy === noMatch(lease.selector))
    return { kind: 'selector', says: serving.joinedWhy, change: 'a selector a free slot matches, or a blueprint whose resources may' };
  // No room: the blueprint's state, its resources in maintenance or quarantine, its limit.
  if (blueprint.state !== 'enabled' && !tried.has('disabled'))
    return {
      kind: 'disabled',
      says: `blueprint ${blueprint.name} is ${blueprint.state}: it makes no resources`,
      change: `enabling blueprint ${blueprint.name}`,
      whatIf: async (_sp, b, l) => ({ blueprint: { ...b, state: 'enabled' }, lease: l }),
    };
  const held = tried.has('resources')
    ? undefined
    : await trx
        .selectFrom('resources')
        .select(['id', 'state'])
        .where('blueprint_id', '=', blueprint.id)
        .where('state', 'in', Object.keys(NO_NEW_LEASES))
        .orderBy('id')
        .limit(1)
        .executeTakeFirst();
  if (held)
    return {
      kind: 'resources',
      says: `resource ${held.id} is ${NO_NEW_LEASES[held.state as keyof typeof NO_NEW_LEASES]}: no new lease lands on it`,
      change: `putting resource ${held.id} back in service (\`slipway resource uncordon ${held.id}\`)`,
      whatIf: async (sp, b, l) => {
        await sp.updateTable('resources').set({ state: 'active' }).where('id', '=', held.id).execute();
        return { blueprint: b, lease: l };
      },
    };
  if (blueprint.live_resources >= blueprint.max_resources && !tried.has('capacity')) {
    // Enough new slots for the leases ahead of it too; the decision checks it,
    // unless it would serve more than a few decisions' worth of them.
    const ahead = serving.joinedAhead ?? { n: 0, orMore: false };
    const orMore = ahead.orMore ? ' or more' : '';
    const max = blueprint.live_resources + Math.ceil((ahead.n + 1) / blueprint.leases_per_resource);
    const change = `blueprint ${blueprint.name}'s max resources at ${max}${orMore} (it is ${blueprint.max_resources})`;
    const says = `blueprint ${blueprint.name} is at its limit: ${blueprint.live_resources} of ${blueprint.max_resources} resources, ${blueprint.leases_per_resource} lease(s) each, no free slot`;
    if (ahead.orMore || ahead.n >= MAX_SERVED_BY_WHAT_IF)
      return { kind: 'capacity', says, change: `${change}: room for the ${ahead.n}${orMore} leases ahead of it in line, and for it` };
    return { kind: 'capacity', says, change, whatIf: async (_sp, b, l) => ({ blueprint: { ...b, max_resources: max }, lease: l }) };
  }
  return undefined;
}

/** The resource states that keep their slots from new leases, in words. */
const NO_NEW_LEASES = { maintenance: 'in maintenance', quarantined: 'quarantined' } as const;

const raiseQuota =
  (quota: Quota, to: number): WhatIf =>
  async (sp, b, l) => {
    await sp
      .updateTable('quotas')
      .set({ max_leases: to })
      .where('team', '=', quota.team)
      .where(sql<boolean>`holder is not distinct from ${quota.holder}`)
      .where(sql<boolean>`blueprint_id is not distinct from ${quota.blueprintId}::bigint`)
      .execute();
    return { blueprint: b, lease: l };
  };

/** The leases the decision chose over this one, and why (fair share and priority, domain/fairShare.ts). */
function chosenInstead(serving: Serving, leaseId: number): Reason[] {
  return [...serving.served.entries()]
    .filter(([id]) => id !== leaseId)
    .map(([, what]) => ({ kind: 'chosenInstead' as const, says: `the slot went to another lease first: ${what}`, change: null }));
}

/**
 * The lowest priority that would have the lease served now, or preempt for
 * it. Where the blueprint preempts, the lowest priority held there plus its
 * margin is tried first: no lower priority preempts anything, and one the
 * line does not serve there it serves at no lower one, so a preemption
 * there is the answer in one decision. Otherwise the highest is tried (none
 * would, if it would not); a victim it would preempt says where to look
 * next, its priority plus the margin, which one more decision confirms;
 * otherwise the levels between are halved. So a few decisions at most.
 */
async function lowestPriority(
  trx: Db,
  lease: Asking,
  decide: (priority: number) => Promise<Verdict>,
  blueprint: BlueprintRow,
): Promise<Reason | undefined> {
  if (lease.priority >= PRIORITY_RANGE.max) return undefined;
  const says = `its priority is ${lease.priority}`;
  const none: Reason = {
    kind: 'priority',
    says,
    change: blueprint.preemption === null ? null : `no priority up to ${PRIORITY_RANGE.max} would preempt for it now`,
  };
  let low = lease.priority + 1;
  let found: { priority: number; verdict: Verdict } | undefined;
  const margin = preemptionOf(blueprint.preemption)?.priorityMargin;
  // Where the blueprint preempts, the lowest priority held there plus the
  // margin is the first that may preempt anything, and the likeliest answer:
  // tried first, a preemption there is the answer (as below); served there,
  // the search goes on below it.
  const held = margin === undefined ? undefined : await lowestHeldPriority(trx, blueprint.id);
  const guess = held === undefined || margin === undefined ? undefined : Math.max(low, held + margin);
  if (guess !== undefined && guess <= PRIORITY_RANGE.max) {
    const verdict = await decide(guess);
    if (verdict.kind === 'preempting') return priorityReason(says, guess, verdict);
    if (verdict.kind === 'served') found = { priority: guess, verdict };
    else low = guess + 1;
  }
  if (!found) {
    if (low > PRIORITY_RANGE.max) return none;
    const highest = await decide(PRIORITY_RANGE.max);
    if (!grants(highest)) return none;
    found = { priority: PRIORITY_RANGE.max, verdict: highest };
    if (highest.kind === 'preempting' && margin !== undefined) {
      const victim = await trx.selectFrom('leases').select('priority').where('id', '=', highest.victim).executeTakeFirstOrThrow();
      const hint = Math.max(low, victim.priority + margin);
      if (hint < found.priority) {
        const verdict = await decide(hint);
        if (grants(verdict)) return priorityReason(says, hint, verdict);
      }
      low = hint + 1;
    }
  }
  let high = found.priority - 1;
  while (low <= high) {
    const mid = Math.floor((low + high) / 2);
    const verdict = await decide(mid);
    if (grants(verdict)) {
      found = { priority: mid, verdict };
      high = mid - 1;
    } else low = mid + 1;
  }
  return priorityReason(says, found.priority, found.verdict);
}

/** The lowest priority among the leases holding a slot at the blueprint, if any hold one. */
async function lowestHeldPriority(trx: Db, blueprintId: number): Promise<number | undefined> {
  const row = await trx
    .selectFrom('leases')
    .select((eb) => eb.fn.min<number>('priority').as('priority'))
    .where('blueprint_id', '=', blueprintId)
    .where('state', 'in', statesWith('lease', 'holdsSlot'))
    .executeTakeFirst();
  return row?.priority ?? undefined;
}

function priorityReason(says: string, priority: number, verdict: Verdict): Reason {
  const what =
    verdict.kind === 'preempting'
      ? `preempt lease ${verdict.victim} (${verdict.message})`
      : verdict.kind === 'served'
        ? `be served: ${verdict.where}`
        : '';
  return { kind: 'priority', says, change: `priority ${priority} or more would ${what}` };
}

/** When a slot frees by itself: the soonest end of a lease holding one (its expiry, or the blueprint's hold limit). */
async function slotsAhead(trx: Db, blueprint: BlueprintRow, lease: Asking, serving: Serving): Promise<Reason[]> {
  const holding = statesWith('lease', 'holdsSlot');
  const limit = blueprint.max_hold_ms === null ? sql`null::timestamptz` : sql`l.granted_at + ${blueprint.max_hold_ms}::bigint * interval '1 ms'`;
  const soonest = await trx
    .selectFrom('leases as l')
    .select(['l.id', 'l.expires_at', sql<Date>`least(l.expires_at, ${limit})`.as('ends_at'), sql<Date>`now()`.as('now')])
    .where('l.blueprint_id', '=', blueprint.id)
    .where('l.state', 'in', holding)
    .where(sql<boolean>`least(l.expires_at, ${limit}) is not null`)
    .orderBy('ends_at')
    .limit(1)
    .executeTakeFirst();
  if (!soonest) return [];
  const ahead = serving.joinedAhead;
  const inLine = ahead && ahead.n > 0 ? ` (${ahead.n}${ahead.orMore ? ' or more' : ''} waiting ahead of it)` : '';
  const how =
    soonest.expires_at !== null && soonest.expires_at.getTime() === soonest.ends_at.getTime() ? 'expires' : "reaches the blueprint's hold limit";
  const inMs = Math.max(0, soonest.ends_at.getTime() - soonest.now.getTime());
  return [
    {
      kind: 'slotFrees',
      says: `lease ${soonest.id} frees a slot when it ${how}, in ${formatDuration(inMs)}${inLine}`,
      change: lease.selector ? 'none, if its resource matches the selector' : 'none: waiting',
    },
  ];
}

/** The events of a decision that takes a slot back for a waiting lease (preemptingLine.ts). */
const PREEMPTING = new Set(['preempting', 'preemption_taken_over']);

function verdictOf(serving: Serving, leaseId: number): Verdict {
  const where = serving.served.get(leaseId);
  if (where !== undefined) return { kind: 'served', where };
  const preempting = serving.events.find((e) => PREEMPTING.has(e.type) && (e.data as { forLeaseId?: number }).forLeaseId === leaseId);
  if (!preempting) return { kind: 'waits', serving };
  return { kind: 'preempting', victim: (preempting.data as { victimLeaseId: number }).victimLeaseId, message: preempting.message };
}

/** The lease as the blueprint's `need_resource` brings it to the line (blueprintHandlers.ts). */
function joiningOf(blueprint: BlueprintRow, lease: Asking) {
  return {
    leaseId: lease.id,
    since: placeInLine(lease.requestedAt, lease.priority, blueprint.priority_step_ms),
    requestedAt: lease.requestedAt,
    priority: lease.priority,
    team: lease.team,
    holder: lease.holder,
    selector: lease.selector,
    ...(lease.reservationId === null ? {} : { reservationId: lease.reservationId }),
  };
}

function summaryOf(who: string, at: readonly AtBlueprint[]): string {
  const granted = at.find((b) => b.grantedNow);
  if (granted) return `${who} would be granted now at ${granted.blueprint}: ${granted.where}`;
  return `${who} would not be granted now: ${at.map((b) => `${b.blueprint}: ${b.reasons[0]?.says ?? 'it waits in line'}`).join('; ')}`;
}

type Savepointing = ControlledTransaction<DB, string[]>;

/** The blueprint's row, its lock held until the transaction ends (no drain is mid-command on it meanwhile). */
async function lockedBlueprint(trx: Db, id: number): Promise<BlueprintRow> {
  await lockObjectInTransaction(trx, { kind: 'blueprint', id });
  return findBlueprint(trx, id);
}

/** Runs `work` in a transaction that is rolled back whatever happens. */
async function inRolledBack<T>(db: Db, work: (trx: Savepointing) => Promise<T>): Promise<T> {
  const trx = (await db.startTransaction().execute()) as unknown as Savepointing;
  try {
    return await work(trx);
  } finally {
    await trx.rollback().execute();
  }
}

/** Runs `work` on a savepoint rolled back after it: its own transaction object, so its step's state (perStep) is its own too. */
async function inSavepoint<T>(trx: Savepointing, work: (sp: Savepointing) => Promise<T>): Promise<T> {
  const sp = await trx.savepoint('what_if').execute();
  try {
    return await work(sp as Savepointing);
  } finally {
    await sp.rollbackToSavepoint('what_if').execute();
    await sp.releaseSavepoint('what_if').execute();
  }
}
