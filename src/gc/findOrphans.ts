import { CompiledQuery, sql } from 'kysely';
import type { BlueprintRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import { formatDuration } from '../domain/durations.ts';
import { formatTime } from '../domain/times.ts';
import { driverBlueprint, type ListResult } from '../drivers/Driver.ts';
import { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import type { GcAction, GcPass, StepReport } from './GcPass.ts';

/** An orphan as this pass recorded it, and whether it may be destroyed now. */
interface Recorded {
  readonly external_id: string;
  readonly passes: number;
  readonly first_seen_at: Date;
  /** Unmatched in two passes or more, for longer than the grace, and not waiting on an allocate that may yet claim it. */
  readonly confirmed: boolean;
  /** A destroy of it is already queued or running. */
  readonly asked: boolean;
}

/**
 * The other half of observing: what each blueprint's driver holds that no
 * resource stands for (docs/operations.md, "Orphans"). For each blueprint
 * whose driver lists (`listResources`), the listing is taken FIRST and the
 * resources read after it: a resource row exists, committed, before its
 * `allocate` runs (the blueprint makes it, then the allocate is drained),
 * so whatever an allocate made is on a row by the time it is listed, and a
 * listing is never compared with rows older than it.
 *
 * A listed thing is matched by the `resourceId` it names, if it names one,
 * else by its attributes (all of them equal in a resource's). It matches a
 * resource of its blueprint in any state but destroyed, or destroyed within
 * the orphan grace (a destroy whose driver call the listing preceded).
 * Unmatched, it is recorded in `orphans` (each pass rewrites the
 * blueprint's rows): reported at once, and destroyed, when the blueprint
 * says `destroy`, only once confirmed: unmatched in two passes at least,
 * first seen longer ago than the grace, and, if it matched by attributes,
 * with no resource of its blueprint still pending (whose allocate has not
 * yet written the attributes that would match it).
 *
 * A listing that fails leaves the blueprint's orphans as they were and is
 * reported; the next pass lists again.
 */
export async function findOrphans(pass: GcPass): Promise<StepReport> {
  const blueprints = await pass.db.selectFrom('blueprints').selectAll().where('state', '<>', 'archived').orderBy('id').execute();
  // Drivers query as they do in the drain: each statement on its own.
  const drivers = new DriverRegistry({ query: (text, values) => pass.db.executeQuery(CompiledQuery.raw(text, values)) });
  const actions: GcAction[] = [];
  let found = 0;
  for (const blueprint of blueprints) {
    if (pass.outOfTime) return { found, actions, truncated: true };
    const driver = validatingDriver(drivers.forBlueprint(blueprint), undefined, blueprint.driver);
    if (!driver.listResources) continue;
    const target = { kind: 'blueprint', id: blueprint.id } as const;
    let listed: ListResult['resources'];
    try {
      listed = (await driver.listResources({ blueprint: driverBlueprint(blueprint) })).resources;
    } catch (error) {
      const message = `listing what the ${blueprint.driver} driver holds failed: ${(error as Error).message}`;
      actions.push({ target: `blueprint:${blueprint.id}`, kind: 'listResources', reason: 'find orphans', refused: message });
      continue;
    }
    const orphans = await recordOrphans(pass.db, blueprint.id, listed, pass.settings.orphanGraceMs);
    found += orphans.length;
    if (blueprint.orphans !== 'destroy') continue;
    for (const orphan of orphans.filter((o) => o.confirmed && !o.asked)) {
      if (pass.outOfTime) return { found, actions, truncated: true };
      const reason = `orphan "${orphan.external_id}": listed by the ${blueprint.driver} driver, no resource stands for it (unmatched in ${orphan.passes} passes since ${formatTime(orphan.first_seen_at)}, longer than the grace of ${formatDuration(pass.settings.orphanGraceMs)}); blueprint ${blueprint.name} destroys orphans`;
      actions.push(await pass.request(target, 'destroy_orphan', reason, { orphan: orphan.external_id }));
    }
  }
  return { found, actions, truncated: false };
}

/**
 * Compares a listing with the blueprint's resources and rewrites its
 * orphans from it, in one transaction: the unmatched are upserted (seen
 * once more), the rest of its rows go. Answers the unmatched.
 */
async function recordOrphans(db: Db, blueprintId: BlueprintRow['id'], listed: ListResult['resources'], graceMs: number): Promise<Recorded[]> {
  const grace = sql`make_interval(secs => ${graceMs / 1000}::float8)`;
  return withTransaction(db, async (trx) => {
    const { rows } = await sql<Recorded>`
      with listed as (
        select l.id, l."resourceId" as resource_id, coalesce(l.attributes, '{}') as attributes
        from jsonb_to_recordset(${JSON.stringify(listed)}::jsonb) as l (id text, "resourceId" bigint, attributes jsonb)
      ), accounted as (
        select r.id, r.attributes from resources r
        where r.blueprint_id = ${blueprintId} and (r.state <> 'destroyed' or r.updated_at > now() - ${grace})
      ), unmatched as (
        select l.* from listed l
        where not exists (
          select 1 from accounted a
          where case when l.resource_id is not null then a.id = l.resource_id
                     else l.attributes <> '{}' and a.attributes @> l.attributes end)
      ), gone as (
        delete from orphans o where o.blueprint_id = ${blueprintId} and o.external_id not in (select id from unmatched)
      ), seen as (
        insert into orphans as o (blueprint_id, external_id, resource_id, attributes)
        select ${blueprintId}, u.id, u.resource_id, u.attributes from unmatched u
        on conflict (blueprint_id, external_id) do update
          set resource_id = excluded.resource_id, attributes = excluded.attributes, last_seen_at = now(), passes = o.passes + 1
        returning o.external_id, o.resource_id, o.passes, o.first_seen_at
      )
      select s.external_id, s.passes, s.first_seen_at,
        s.passes >= 2 and s.first_seen_at <= now() - ${grace}
          and (s.resource_id is not null
               or not exists (select 1 from resources r where r.blueprint_id = ${blueprintId} and r.state = 'pending')) as confirmed,
        exists (select 1 from commands c
          where c.target_kind = 'blueprint' and c.target_id = ${blueprintId} and c.kind = 'destroy_orphan'
            and c.status in ('queued', 'running') and c.payload ->> 'orphan' = s.external_id) as asked
      from seen s
      order by s.external_id
    `.execute(trx);
    return rows;
  });
}
