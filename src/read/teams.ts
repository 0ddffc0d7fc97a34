import { sql } from 'kysely';
import type { TeamEventRow, TeamRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { NotFoundError } from '../domain/errors.ts';
import { countFor, type Counted } from '../domain/quotas.ts';
import { countedOverall } from '../db/countedLeases.ts';
import { waitingLeases } from '../db/waitingLeases.ts';

/** A quota as listed: where it applies, its maximum and what it counts now. */
export interface QuotaView {
  readonly holder: string | null;
  readonly blueprintId: number | null;
  readonly blueprintName: string | null;
  readonly maxLeases: number;
  readonly counted: number;
  readonly createdBy: string;
  readonly updatedAt: Date;
}

/** A team with its tokens, what it holds and waits for now, and its quotas. */
export interface TeamView extends TeamRow {
  readonly tokens: number;
  /** Leases counted against quotas: holding slots, or sent to take one. */
  readonly counted: number;
  /** Leases waiting in blueprints' lines. */
  readonly waiting: number;
  readonly quotas: readonly QuotaView[];
}

export interface TeamDetail extends TeamView {
  /** Every change to the team, newest first (the last 100). */
  readonly changes: readonly TeamEventRow[];
}

/** Every team, by name (few: an organization's teams, not its users). */
export async function listTeams(db: Db): Promise<TeamView[]> {
  const teams = await db.selectFrom('teams').selectAll().orderBy('name').execute();
  return teamViews(db, teams);
}

export async function readTeam(db: Db, name: string): Promise<TeamDetail> {
  const team = await db.selectFrom('teams').selectAll().where('name', '=', name).executeTakeFirst();
  if (!team) throw new NotFoundError('team', name);
  const [view] = await teamViews(db, [team]);
  const changes = await db.selectFrom('team_events').selectAll().where('team', '=', name).orderBy('id', 'desc').limit(100).execute();
  return { ...view!, changes };
}

async function teamViews(db: Db, teams: readonly TeamRow[]): Promise<TeamView[]> {
  const names = teams.map((t) => t.name);
  if (names.length === 0) return [];
  // One after the other: `db` may be a request's transaction, one connection.
  const counted = await countedOverall(db, names);
  const tokens = await db
    .selectFrom('api_tokens')
    .select(['team', sql<number>`count(*)::int`.as('n')])
    .where('revoked_at', 'is', null)
    .where('team', 'in', names)
    .groupBy('team')
    .execute();
  const waiting = await waitingLeases(db)
    .select(['w.team', sql<number>`count(*)::int`.as('n')])
    .where('w.team', 'in', names)
    .groupBy('w.team')
    .execute();
  const quotas = await db
    .selectFrom('quotas as q')
    .leftJoin('blueprints as b', 'b.id', 'q.blueprint_id')
    .select(['q.team', 'q.holder', 'q.blueprint_id', 'b.name as blueprint_name', 'q.max_leases', 'q.created_by', 'q.updated_at'])
    .where('q.team', 'in', names)
    .orderBy('q.id')
    .execute();
  const byTeam = (rows: ReadonlyArray<{ team: string; n: number }>) => new Map(rows.map((r) => [r.team, r.n]));
  const tokensOf = byTeam(tokens);
  const waitingOf = byTeam(waiting);
  const sum = (rows: readonly Counted[]) => rows.reduce((n, c) => n + c.n, 0);
  return teams.map((team) => ({
    ...team,
    tokens: tokensOf.get(team.name) ?? 0,
    counted: sum(counted.filter((c) => c.team === team.name)),
    waiting: waitingOf.get(team.name) ?? 0,
    quotas: quotas
      .filter((q) => q.team === team.name)
      .map((q) => ({
        holder: q.holder,
        blueprintId: q.blueprint_id,
        blueprintName: q.blueprint_name,
        maxLeases: q.max_leases,
        counted: countFor({ team: q.team, holder: q.holder, blueprintId: q.blueprint_id, maxLeases: q.max_leases }, counted),
        createdBy: q.created_by,
        updatedAt: q.updated_at,
      })),
  }));
}
