import { z } from 'zod';
import { sql } from 'kysely';
import type { CommandRow, LeaseRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import type { Actor } from '../domain/Actor.ts';
import { CommandRejectedError, describeZodIssues, InvalidInputError, NotFoundError, OverQuotaError } from '../domain/errors.ts';
import { describeQuota } from '../domain/quotas.ts';
import { formatSelector, type Selector, SelectorSchema } from '../domain/labels.ts';
import { chooseBlueprint, whyBlueprintNeverMatches } from './chooseBlueprint.ts';
import { quotaReachedNow } from '../drain/reads/countedLeases.ts';
import { findBlueprint } from '../read/blueprints.ts';
import { DEFAULT_TEAM, TeamNameSchema } from '../domain/team.ts';
import { assertTeamExists } from './teams.ts';
import { statesWith } from '../domain/lifecycle.ts';
import { PrioritySchema } from '../domain/priority.ts';
import { recordAppended } from '../metrics/metrics.ts';
import type { LeaseView } from '../read/leases.ts';
import { PREPARED_MARK } from '../db/PreparingClient.ts';
import { leaseColumns } from '../db/rowColumns.ts';
import { fromNow } from './leaseDeadlines.ts';
import { appendCall, signalWorkersOnCommit } from '../queue/appendCommand.ts';

const DAY_MS = 24 * 3600 * 1000;

/**
 * How long a lease may wait and how long it lives, shared by every interface
 * that creates leases (the CLI's and the API's bodies are this plus their own
 * fields).
 */
const LEASE_EXPIRY_FIELDS = {
  /** An absolute expiry, with its offset, e.g. 2030-01-01T12:00:00Z. */
  expiresAt: z.iso
    .datetime({ offset: true, message: 'expected an ISO 8601 time with its offset, e.g. 2030-01-01T12:00:00Z' })
    .transform((text) => new Date(text))
    .refine((at) => at.getTime() > Date.now(), 'must be in the future')
    .optional(),
  /** Relative expiry; also the term a renewal without its own extends the lease by. */
  expiresInMs: z
    .number()
    .int()
    .min(1000, 'expected at least 1 s')
    .max(366 * DAY_MS)
    .optional(),
  /** A heartbeat lease: released when its holder stops renewing it (see leaseDeadlines). */
  heartbeatMs: z.number().int().min(1000, 'expected at least 1 s').max(DAY_MS).optional(),
  /** The wait deadline: not active this long after the request, the lease is released as `system:deadline`. */
  waitTimeoutMs: z
    .number()
    .int()
    .min(1000, 'expected at least 1 s')
    .max(366 * DAY_MS)
    .optional(),
};

type ExpiryOutput = z.output<z.ZodObject<typeof LEASE_EXPIRY_FIELDS>>;

/** A strict lease body: `fields` plus the expiry fields, with at most one of expiresAt and expiresInMs, and a blueprint or a selector. */
export function leaseBodySchema<Fields extends z.ZodRawShape>(fields: Fields) {
  return z
    .object({ ...fields, ...LEASE_EXPIRY_FIELDS })
    .strict()
    .refine((lease) => (lease as ExpiryOutput).expiresAt === undefined || (lease as ExpiryOutput).expiresInMs === undefined, {
      message: 'give expiresAt or expiresInMs, not both',
      path: ['expiresInMs'],
    })
    .refine((lease) => (lease as Aimed).blueprint !== undefined || (lease as Aimed).selector !== undefined, {
      message: 'name a blueprint, a selector, or both',
      path: ['blueprint'],
    });
}

type Aimed = { blueprint?: unknown; selector?: unknown };

export const LeaseInputSchema = leaseBodySchema({
  /** The blueprint's name or id; left out, a selector chooses it (chooseBlueprint). */
  blueprint: z.union([z.string().min(1).max(63), z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]).optional(),
  /** What the lease needs of its resource's labels: granted only a slot whose resource matches it. */
  selector: SelectorSchema.optional(),
  holder: z.string().min(1).max(200),
  /** The requester's own labels, kept on the lease beside what the driver reports. */
  attributes: z.record(z.string(), z.unknown()).optional(),
  /** The holder's callback, already checked against the allow-list (the API's checkCallbackUrl). */
  callbackUrl: z.string().max(2048).optional(),
  /** 0–9 (the API checks it against the caller's role): where the lease joins its blueprint's line. */
  priority: PrioritySchema.optional(),
  /** The requester's team (the API's is its token's); `default` unless given. */
  team: TeamNameSchema.optional(),
  /** false: refused at once (OverQuotaError) when a quota of the team or holder is reached, rather than waiting in line. */
  queue: z.boolean().optional(),
});
export type LeaseInput = z.input<typeof LeaseInputSchema>;

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
  const { holder, expiresAt, expiresInMs, heartbeatMs, waitTimeoutMs, attributes, callbackUrl, priority, queue, selector } = parsed.data;
  const { ref, routed } = await aimedAt(db, parsed.data.blueprint, selector);
  const team = parsed.data.team ?? DEFAULT_TEAM;
  if (team !== DEFAULT_TEAM) await assertTeamExists(db, team);
  if (queue === false) await refuseOverQuota(db, ref, team, holder);
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
      insert into leases (blueprint_id, holder, expires_at, term_ms, heartbeat_ms, wait_deadline, attributes, callback_url, priority, team, selector)
      select b.id, ${holder}, ${expiry}, ${termMs === undefined ? null : Math.max(1000, Math.round(termMs))}::bigint,
             ${heartbeatMs ?? null}::int, ${waitTimeoutMs === undefined ? sql`null::timestamptz` : fromNow(waitTimeoutMs)},
             ${JSON.stringify(attributes ?? {})}::jsonb, ${callbackUrl ?? null}::text, ${priority ?? 0}::smallint, ${team}::text,
             ${selector === undefined ? null : formatSelector(selector)}::text
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
