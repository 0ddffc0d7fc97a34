import { sql } from 'kysely';
import type { Db } from './Database.ts';
import { type DecayedUse, decayUse } from '../domain/fairShare.ts';

/**
 * What teams used at a blueprint over time (team_usage, migration 0036,
 * decision 0040): each team's slot-time and grants there, decayed with the
 * blueprint's half-life. Only the blueprint's drain writes it, in the
 * decisions that weigh teams (waitingLine.ts), which are the only ones that
 * grant: so a grant is counted in the decision that makes it, and a slot's
 * time from there.
 *
 * A slot given back is not told to the blueprint unless a lease waits
 * there (slotsGivenBack.ts), so the time between two decisions is counted
 * as the slots the first left each team holding (`held`): while a lease
 * waits, every slot given back brings a decision within a step, so a slot
 * is counted until then, which is also when another lease may have it.
 * With the line left empty nothing tells the blueprint, and the next
 * decision counts that stretch as the slots each team holds then.
 */
export interface TeamUsage extends DecayedUse {
  readonly team: string;
  readonly weight: number;
}

/** Each team's weight and use lately, brought to the read's time, and that time (the database's, as every writer of the rows reads it). */
export interface UsageRead {
  readonly teams: readonly TeamUsage[];
  readonly at: Date;
}

/**
 * The weights of `teams`, and the use of every team with a row at the
 * blueprint whose slots held may have changed (those in `teams`, and those
 * the last decision left holding some, or did not know of): one read, by
 * the keys of teams and team_usage. `nowHeld` says what a team holds now,
 * for the stretch its row does not know of.
 */
export async function readTeamUsage(
  trx: Db,
  blueprint: { readonly id: number; readonly fair_share_half_life_ms: number },
  teams: readonly string[],
  nowHeld: (team: string) => number,
): Promise<UsageRead> {
  const { rows } = await sql<{
    name: string;
    weight: number;
    slot_seconds: number | null;
    grants: number | null;
    held: number | null;
    age_ms: number | null;
    now: Date;
  }>`
    select t.name, t.weight, u.slot_seconds, u.grants, u.held,
           (extract(epoch from statement_timestamp() - u.at) * 1000)::float8 as age_ms, statement_timestamp() as now
    from teams t
    left join team_usage u on u.blueprint_id = ${blueprint.id} and u.team = t.name
    where t.name = any(${[...teams]}::text[] || array(
      select team from team_usage where blueprint_id = ${blueprint.id} and held is distinct from 0))
  `.execute(trx);
  const halfLife = blueprint.fair_share_half_life_ms;
  return {
    at: rows[0]?.now ?? new Date(),
    teams: rows.map((r) => ({
      team: r.name,
      weight: r.weight,
      ...(r.age_ms === null
        ? { slotSeconds: 0, grants: 0 }
        : decayUse({ slotSeconds: r.slot_seconds!, grants: r.grants! }, r.age_ms, halfLife, r.held ?? nowHeld(r.name))),
    })),
  };
}

/**
 * Writes what a decision counted: each team's use as of `at`, the grants
 * it made counted in, and the slots it left the team holding (null when it
 * left the line empty: releases are not told to the blueprint then).
 */
export async function writeTeamUsage(
  trx: Db,
  blueprintId: number,
  at: Date,
  rows: ReadonlyArray<DecayedUse & { readonly team: string; readonly held: number | null }>,
): Promise<void> {
  if (rows.length === 0) return;
  await trx
    .insertInto('team_usage')
    .values(rows.map((r) => ({ blueprint_id: blueprintId, team: r.team, slot_seconds: r.slotSeconds, grants: r.grants, held: r.held, at })))
    .onConflict((oc) =>
      oc.columns(['blueprint_id', 'team']).doUpdateSet((eb) => ({
        slot_seconds: eb.ref('excluded.slot_seconds'),
        grants: eb.ref('excluded.grants'),
        held: eb.ref('excluded.held'),
        at: eb.ref('excluded.at'),
      })),
    )
    .execute();
}
