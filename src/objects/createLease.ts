import { sql } from 'kysely';
import type { CommandRow, LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError, OverQuotaError } from '../domain/errors.ts';
import { describeQuota } from '../domain/quotas.ts';
import { formatSelector, type Selector } from '../domain/labels.ts';
import { chooseBlueprint } from './chooseBlueprint.ts';
import { whyBlueprintNeverMatches } from '../domain/programLabels.ts';
import { quotaReachedNow } from '../db/countedLeases.ts';
import { countProtected } from '../db/preemptions.ts';
import { preemptionOf } from '../domain/preemption.ts';
import { findBlueprint } from '../read/blueprints.ts';
import { DEFAULT_TEAM } from '../domain/team.ts';
import { assertTeamExists } from './teams.ts';
import { statesWith } from '../domain/lifecycle.ts';
import { recordAppended } from '../metrics/metrics.ts';
import type { LeaseView } from '../read/leases.ts';
import { PREPARED_MARK } from '../db/PreparingClient.ts';
import { leaseColumns } from '../db/rowColumns.ts';
import { fromNow } from './leaseDeadlines.ts';
import { appendCall, signalWorkersOnCommit } from '../queue/appendCommand.ts';
import { LeaseInputSchema, type LeaseInput } from './leaseInput.ts';
import { usableReservation } from './reservations.ts';
import type { ReservationTerms } from '../domain/reservations.ts';

/**
 * Creates a lease, queues its first command and records its `created`
 * event, in one statement: the one place (with resource creation) where a
 * row is written without holding its lock, because nobody else can know of
 * it yet. The first command is the blueprint's `need_resource`: the lease
 * joins its blueprint's waiting line, served at once if there is room
 * (docs/decisions/0026-a-new-lease-asks-its-blueprint-directly.md). One
 * statement, not a transaction of four: a lease's time to active is counted
 * from this call, and each statement of a transaction is a round trip. On
 * `db` it commits by itself; in a caller's transaction (the API's, which
 * records an Idempotency-Key with it) it commits with it.
 */
export async function createLease(db: Db, input: LeaseInput, actor: Actor): Promise<{ lease: LeaseView; command: CommandRow }> {
  const parsed = LeaseInputSchema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid lease: ${describeZodIssues(parsed.error.issues)}`);
  const { holder, expiresAt, expiresInMs, heartbeatMs, waitTimeoutMs, attributes, callbackUrl, priority, queue, selector, preemptible } = parsed.data;
  const team = parsed.data.team ?? DEFAULT_TEAM;
  if (team !== DEFAULT_TEAM) await assertTeamExists(db, team);
  const reserved =
    parsed.data.reservation === undefined ? undefined : await reservationFor(db, parsed.data.reservation, parsed.data.blueprint, team, holder);
  const { ref, routed } = await aimedAt(db, parsed.data.blueprint ?? reserved?.blueprintId, selector);
  // A lease of a reservation ends by the end of its window, waiting or not (its grant tells the holder ahead, as for a time limit).
  const reservedUntil = reserved?.endsAt.toISOString() ?? null;
  if (queue === false) await refuseOverQuota(db, ref, team, holder);
  if (preemptible === false) await refuseOverProtected(db, ref, team);
  // An absolute expiry's term (for renewals) is what was left of it when asked.
  const termMs = expiresInMs ?? (expiresAt ? expiresAt.getTime() - Date.now() : undefined);
  // A relative expiry counts on the database's clock, as every deadline does
  // (leaseDeadlines.ts). The heartbeat clock starts when the lease becomes
  // active (its grant): a holder waiting for capacity has nothing to beat for yet.
  const expiry = expiresInMs === undefined ? sql`${expiresAt?.toISOString() ?? null}::timestamptz` : fromNow(expiresInMs);
  const needResource = appendCall(
    {
      target: { kind: 'blueprint', id: sql<number>`b.id` },
      kind: 'need_resource',
      payloadIds: { leaseId: sql<number>`lease.id` },
      actor,
    },
    { fromOutside: false },
  );
  // Prepared on each connection (PreparingClient): planning this statement
  // was about half of its server time, on the path of every new lease.
  const { rows } = await sql<CreatedRow>`${sql.raw(PREPARED_MARK)}
    with b as (
      select id, name, state from blueprints where ${sql.ref(typeof ref === 'number' ? 'id' : 'name')} = ${ref}
    ),
    lease as (
      insert into leases (blueprint_id, holder, expires_at, term_ms, heartbeat_ms, wait_deadline, attributes, callback_url, priority, team, selector, preemptible, reservation_id, reservation_ends_at, end_by)
      select b.id, ${holder}, ${expiry}, ${termMs === undefined ? null : Math.max(1000, Math.round(termMs))}::bigint,
             ${heartbeatMs ?? null}::int, ${waitTimeoutMs === undefined ? sql`null::timestamptz` : fromNow(waitTimeoutMs)},
             ${JSON.stringify(attributes ?? {})}::jsonb, ${callbackUrl ?? null}::text, ${priority ?? 0}::smallint, ${team}::text,
             ${selector === undefined ? null : formatSelector(selector)}::text, ${preemptible ?? true}::boolean,
             ${reserved?.id ?? null}::bigint, ${reservedUntil}::timestamptz, ${reservedUntil}::timestamptz
      from b where b.state = any(${statesWith('blueprint', 'takesLeases')}::text[])
      returning *
    ),
    appended as (select (f.cmd).* from lease, b cross join lateral ${needResource} as f),
    event as (
      insert into events (target_kind, target_id, command_id, type, to_state, message, actor, source)
      select 'lease', lease.id, a.id, 'created', lease.state, format('requested on %s for %s', b.name, ${holder}::text) || ${routed ? `; ${routed}` : ''}::text,
             ${actor.issuedBy}, ${actor.source}
      from lease, appended a, b
    )
    select b.name as blueprint_name, b.state as blueprint_state, to_jsonb(a) as command, ${leaseColumns('lease')}
    from b left join lease on true left join appended a on true
  `.execute(db);
  const row = rows[0];
  if (!row) throw new NotFoundError('blueprint', ref);
  const { blueprint_state, command: appended, ...lease } = row;
  if (!appended) {
    throw new CommandRejectedError(`blueprint ${row.blueprint_name} is ${blueprint_state}; it takes no new leases`, { state: blueprint_state });
  }
  const command = commandFromJson(appended);
  recordAppended(command, actor.source);
  await signalWorkersOnCommit(db, { kind: 'blueprint', id: lease.blueprint_id! });
  return { lease: lease as LeaseView, command };
}

/**
 * The blueprint a request goes to: the one it names, which must be able to
 * match its selector (400 otherwise, saying why), or, with only a selector,
 * the one chooseBlueprint picks, with why.
 */
async function aimedAt(
  db: Db,
  named: string | number | undefined,
  selector: Selector | undefined,
): Promise<{ ref: string | number; routed?: string }> {
  if (named === undefined) {
    const chosen = await chooseBlueprint(db, selector!);
    return { ref: chosen.id, routed: chosen.why };
  }
  if (selector !== undefined) {
    const blueprint = await findBlueprint(db, named);
    const why = whyBlueprintNeverMatches(blueprint, selector);
    if (why) {
      throw new InvalidInputError(`no resource of blueprint ${blueprint.name} can ever match selector ${formatSelector(selector)}: ${why}`, {
        field: 'selector',
      });
    }
  }
  return { ref: named };
}

/** The reservation a request names, if its lease may use it now (refused, saying why, otherwise). */
async function reservationFor(db: Db, id: number, named: string | number | undefined, team: string, holder: string): Promise<ReservationTerms> {
  const blueprintId = named === undefined ? undefined : (await findBlueprint(db, named)).id;
  return usableReservation(db, id, { team, holder, blueprintId });
}

/** A request that asked not to wait, refused if a quota of its team or holder is reached, naming the quota. */
async function refuseOverQuota(db: Db, ref: string | number, team: string, holder: string): Promise<void> {
  const blueprint = await findBlueprint(db, ref);
  const hit = await quotaReachedNow(db, { team, holder, blueprintId: blueprint.id });
  if (!hit) return;
  const quota = describeQuota(hit.quota, () => blueprint.name);
  throw new OverQuotaError(`${quota} is reached (${hit.count} counted); the request asked not to wait (queue: false), so no lease was made`, {
    team,
    holder: hit.quota.holder,
    blueprint: hit.quota.blueprintId === null ? null : blueprint.name,
    maxLeases: hit.quota.maxLeases,
    counted: hit.count,
  });
}

/**
 * Refuses a lease asked not to be preempted when its team already has its
 * blueprint's allowance of them (preemption.protectedPerTeam) live there.
 * A look, as refuseOverQuota's: two requests at once may both pass it, and
 * the blueprint then protects only the team's first ones (readVictimCandidates).
 */
async function refuseOverProtected(db: Db, ref: string | number, team: string): Promise<void> {
  const blueprint = await findBlueprint(db, ref);
  const allowed = preemptionOf(blueprint.preemption)?.protectedPerTeam ?? 0;
  const live = await countProtected(db, blueprint.id, team);
  if (live < allowed) return;
  throw new OverQuotaError(
    `team ${team} may have ${allowed} lease(s) at ${blueprint.name} that cannot be preempted (its preemption.protectedPerTeam), and has ${live}: ask for a preemptible lease, or ask an operator to raise it`,
    { team, blueprint: blueprint.name, protectedPerTeam: allowed, counted: live },
  );
}

/** What createLease's statement answers: the lease's row and its blueprint's name, or only the blueprint's name and state if it takes no leases. */
type CreatedRow = Partial<LeaseRow> & { blueprint_name: string; blueprint_state: string; command: Record<string, unknown> | null };

/** A command row read as JSON (to_jsonb), its times as Dates as the driver reads them from columns. */
function commandFromJson(json: Record<string, unknown>): CommandRow {
  const time = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string));
  return {
    ...(json as unknown as CommandRow),
    not_before: time(json.not_before)!,
    created_at: time(json.created_at)!,
    started_at: time(json.started_at),
    finished_at: time(json.finished_at),
  };
}
