import { sql } from 'kysely';
import { z } from 'zod';
import type { QuotaRow, TeamRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import type { Actor } from '../domain/Actor.ts';
import { describeZodIssues, InvalidInputError, NotFoundError, SlipwayError } from '../domain/errors.ts';
import { describeQuota, describeScope, QuotaInputSchema, type QuotaInput, type QuotaScope, QuotaScopeSchema } from '../domain/quotas.ts';
import { TeamNameSchema, WeightSchema } from '../domain/team.ts';
import { blueprintsWhereTeamWaits } from '../db/teamWaiters.ts';
import { appendInTransaction } from '../queue/appendCommand.ts';
import { findBlueprint } from '../read/blueprints.ts';

/**
 * Changing teams, their weights and their quotas (docs/scheduling.md). A
 * team is never deleted: leases and their history name it. Every change is
 * recorded in team_events with who made it.
 */

export const TeamInputSchema = z.object({ name: TeamNameSchema, weight: WeightSchema.optional() }).strict();
export type TeamInput = z.input<typeof TeamInputSchema>;

function parse<T extends z.ZodType>(schema: T, input: unknown, what: string): z.output<T> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid ${what}: ${describeZodIssues(parsed.error.issues)}`);
  return parsed.data;
}

/** Refuses a team name that names no team, saying how to make one. */
export async function assertTeamExists(db: Db, team: string): Promise<void> {
  const row = await db.selectFrom('teams').select('name').where('name', '=', team).executeTakeFirst();
  if (!row) throw new NotFoundError('team', team, `make it with \`slipway team set ${team}\` (or POST /v1/teams/${team})`);
}

/** Makes a team, or sets the weight of one (a team made without a weight has 1). */
export async function setTeam(db: Db, input: TeamInput, actor: Actor): Promise<TeamRow> {
  const { name, weight } = parse(TeamInputSchema, input, 'team');
  return withTransaction(db, async (trx) => {
    const before = await trx.selectFrom('teams').select('weight').where('name', '=', name).forUpdate().executeTakeFirst();
    const row = await trx
      .insertInto('teams')
      .values({ name, weight: weight ?? 1, created_by: actor.issuedBy })
      .onConflict((oc) => oc.column('name').doUpdateSet({ weight: weight ?? sql<number>`teams.weight`, updated_at: sql<Date>`now()` }))
      .returningAll()
      .executeTakeFirstOrThrow();
    const message = before ? `weight ${before.weight} → ${row.weight}` : `made with weight ${row.weight}`;
    await recordTeamEvent(trx, name, before ? 'weight_set' : 'created', message, { weight: row.weight }, actor);
    return row;
  });
}

/**
 * Sets a quota (making it, or changing its maximum). A lower maximum ends
 * no lease: it only keeps new ones waiting. Any change asks the blueprints
 * where the team waits to serve their lines again, as a raised quota may
 * let a waiter in.
 */
export async function setQuota(db: Db, input: QuotaInput, actor: Actor): Promise<QuotaRow> {
  const { maxLeases, ...scope } = parse(QuotaInputSchema, input, 'quota');
  return withTransaction(db, async (trx) => {
    const where = await scopeOf(trx, scope);
    const row = await trx
      .insertInto('quotas')
      .values({ team: where.team, holder: where.holder, blueprint_id: where.blueprintId, max_leases: maxLeases, created_by: actor.issuedBy })
      .onConflict((oc) =>
        oc
          // The columns of quotas_one_per_scope, the index that makes a scope one row.
          .expression(sql`team, (coalesce(holder, '')), (coalesce(blueprint_id, 0))`)
          .doUpdateSet({ max_leases: maxLeases, updated_at: sql<Date>`now()` }),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
    const text = describeQuota({ ...where, maxLeases }, () => where.blueprintName!);
    await recordTeamEvent(trx, where.team, 'quota_set', text, { holder: where.holder, blueprintId: where.blueprintId, maxLeases }, actor);
    await serveTeamWaiters(trx, where, `${text} set`, actor);
    return row;
  });
}

/** Removes a quota; the team's waiters it held back are served. */
export async function removeQuota(db: Db, input: QuotaScope, actor: Actor): Promise<QuotaRow> {
  const scope = parse(QuotaScopeSchema, input, 'quota');
  return withTransaction(db, async (trx) => {
    const where = await scopeOf(trx, scope);
    const row = await trx
      .deleteFrom('quotas')
      .where('team', '=', where.team)
      .where(sql<boolean>`coalesce(holder, '') = ${where.holder ?? ''} and coalesce(blueprint_id, 0) = ${where.blueprintId ?? 0}`)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new SlipwayError('not_found', `no quota is set for ${describeScope(where, () => where.blueprintName!)}`, { ...scope });
    const text = describeQuota({ ...where, maxLeases: row.max_leases }, () => where.blueprintName!);
    await recordTeamEvent(trx, where.team, 'quota_removed', `${text} removed`, { holder: where.holder, blueprintId: where.blueprintId }, actor);
    await serveTeamWaiters(trx, where, `${text} removed`, actor);
    return row;
  });
}

interface Scope {
  readonly team: string;
  readonly holder: string | null;
  readonly blueprintId: number | null;
  readonly blueprintName: string | null;
}

async function scopeOf(trx: Db, scope: z.output<typeof QuotaScopeSchema>): Promise<Scope> {
  await assertTeamExists(trx, scope.team);
  const blueprint = scope.blueprint === undefined ? undefined : await findBlueprint(trx, scope.blueprint);
  return { team: scope.team, holder: scope.holder ?? null, blueprintId: blueprint?.id ?? null, blueprintName: blueprint?.name ?? null };
}

/** Asks the blueprints a quota covers, where its team waits, to serve their lines again. */
async function serveTeamWaiters(trx: Db, scope: Scope, reason: string, actor: Actor): Promise<void> {
  const blueprints = scope.blueprintId === null ? await blueprintsWhereTeamWaits(trx, scope.team, { anyQuota: false }) : [scope.blueprintId];
  for (const id of blueprints) {
    await appendInTransaction(trx, { target: { kind: 'blueprint', id }, kind: 'serve_waiters', actor: { ...actor, reason } }, { fromOutside: false });
  }
}

async function recordTeamEvent(trx: Db, team: string, type: string, message: string, data: unknown, actor: Actor): Promise<void> {
  await trx
    .insertInto('team_events')
    .values({ team, type, message, data: JSON.stringify(data), actor: actor.issuedBy, source: actor.source })
    .execute();
}
