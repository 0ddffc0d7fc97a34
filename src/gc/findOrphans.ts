import { CompiledQuery, sql } from 'kysely';
import type { BlueprintRow, ResourceRow } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { withTransaction } from '../db/withTransaction.ts';
import { formatDuration } from '../domain/durations.ts';
import { statesAccepting } from '../domain/lifecycle.ts';
import { formatTime } from '../domain/times.ts';
import { type Driver, driverBlueprint, driverResource, type ListedSlot, type ListResult } from '../drivers/Driver.ts';
import { DriverRegistry } from '../drivers/registry.ts';
import { validatingDriver } from '../drivers/validatingDriver.ts';
import type { GcAction, GcPass, StepReport } from './GcPass.ts';

/** An orphan as this pass recorded it, and whether it may be destroyed now. */
interface Recorded {
  readonly external_id: string;
  /** Set for an orphaned slot: the resource it is on, whose queue frees it. */
  readonly resource_id: number | null;
  readonly slot: number | null;
  readonly passes: number;
  readonly first_seen_at: Date;
  /** Unmatched in two passes or more, for longer than the grace, and not waiting on an allocate that may yet claim it. */
  readonly confirmed: boolean;
  /** A destroy of it is already queued or running. */
  readonly asked: boolean;
}

/** A listing's answer, or why it failed (reported in the pass's actions; the orphans it would have rewritten stay as they were). */
type Listing<T> = { readonly listed: T } | { readonly failed: GcAction };

async function listing<T>(target: string, kind: keyof Driver, what: string, list: () => Promise<T>): Promise<Listing<T>> {
  try {
    return { listed: await list() };
  } catch (error) {
    return { failed: { target, kind, reason: 'find orphans', refused: `listing ${what} failed: ${(error as Error).message}` } };
  }
}

/**
 * The other half of observing: what each blueprint's driver holds that no
 * resource, or no lease, stands for (docs/operations.md, "Orphans").
 *
 * Things no resource stands for: for each blueprint whose driver lists
 * (`listResources`), the listing is taken FIRST and the resources read
 * after it: a resource row exists, committed, before its `allocate` runs
 * (the blueprint makes it, then the allocate is drained), so whatever an
 * allocate made is on a row by the time it is listed, and a listing is
 * never compared with rows older than it. A listed thing is matched by the
 * `resourceId` it names, if it names one, else by its attributes (all of
 * them equal in a resource's). It matches a resource of its blueprint in
 * any state but destroyed, or destroyed within the orphan grace (a destroy
 * whose driver call the listing preceded).
 *
 * Slots no lease holds: for each live resource (one that would take a
 * destroy_orphan) whose driver lists its slots (`listSlots`), the slots are
 * listed FIRST and the rows read after, for the same reason: a slot's row
 * is committed by the resource's acquire before the lease's driver call
 * makes the slot. A listed slot is held while it has a row (granted, or
 * waiting to be cleaned), or while a lease on it is not destroyed, or was
 * destroyed within the grace (a release whose driver call the listing
 * preceded).
 *
 * Unmatched, either is recorded in `orphans` (each pass rewrites the
 * blueprint's rows): reported at once, and destroyed, when the blueprint
 * says `destroy`, only once confirmed: unmatched in two passes at least,
 * first seen longer ago than the grace, and, if it matched by attributes,
 * with no resource of its blueprint still pending (whose allocate has not
 * yet written the attributes that would match it). A thing is destroyed by
 * its blueprint's queue, a slot freed by its resource's.
 *
 * A listing that fails leaves the orphans it covers as they were and is
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
    const orphans: Recorded[] = [];
    const { listResources, listSlots } = driver;
    if (listResources) {
      const resources = await listing(
        `blueprint:${blueprint.id}`,
        'listResources',
        `what the ${blueprint.driver} driver holds`,
        async () => (await listResources({ blueprint: driverBlueprint(blueprint) })).resources,
      );
      if ('failed' in resources) actions.push(resources.failed);
      else orphans.push(...(await recordOrphans(pass.db, blueprint.id, resources.listed, pass.settings.orphanGraceMs)));
    }
    if (listSlots) {
      const { recorded, failed } = await findOrphanedSlots(pass, blueprint, listSlots);
      actions.push(...failed);
      orphans.push(...recorded);
    }
    found += orphans.length;
    if (blueprint.orphans !== 'destroy') continue;
    for (const orphan of orphans.filter((o) => o.confirmed && !o.asked)) {
      if (pass.outOfTime) return { found, actions, truncated: true };
      actions.push(await askToDestroy(pass, blueprint, orphan));
    }
  }
  return { found, actions, truncated: false };
}

/** The destroy of a confirmed orphan: a thing's on its blueprint's queue, a slot's on its resource's, as `system:gc` with why. */
function askToDestroy(pass: GcPass, blueprint: BlueprintRow, orphan: Recorded): Promise<GcAction> {
  const since = `unmatched in ${orphan.passes} passes since ${formatTime(orphan.first_seen_at)}, longer than the grace of ${formatDuration(pass.settings.orphanGraceMs)}`;
  const payload = { orphan: orphan.external_id };
  if (orphan.slot === null) {
    const reason = `orphan "${orphan.external_id}": listed by the ${blueprint.driver} driver, no resource stands for it (${since}); blueprint ${blueprint.name} destroys orphans`;
    return pass.request({ kind: 'blueprint', id: blueprint.id }, 'destroy_orphan', reason, payload);
  }
  const reason = `orphaned slot ${orphan.slot} ("${orphan.external_id}"): listed by the ${blueprint.driver} driver on resource ${orphan.resource_id}, no lease holds it (${since}); blueprint ${blueprint.name} destroys orphans`;
  return pass.request({ kind: 'resource', id: Number(orphan.resource_id) }, 'destroy_orphan', reason, payload);
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
        delete from orphans o where o.blueprint_id = ${blueprintId} and o.slot is null and o.external_id not in (select id from unmatched)
      ), seen as (
        insert into orphans as o (blueprint_id, external_id, resource_id, attributes)
        select ${blueprintId}, u.id, u.resource_id, u.attributes from unmatched u
        on conflict (blueprint_id, external_id) do update
          set resource_id = excluded.resource_id, attributes = excluded.attributes, slot = null, last_seen_at = now(), passes = o.passes + 1
        returning o.external_id, o.resource_id, o.passes, o.first_seen_at
      )
      select s.external_id, s.resource_id, null::int as slot, s.passes, s.first_seen_at,
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

/**
 * Lists the slots of each of the blueprint's live resources (those that
 * would take a destroy_orphan), and only after every listing compares
 * them with the rows (recordOrphanedSlots).
 */
async function findOrphanedSlots(
  pass: GcPass,
  blueprint: BlueprintRow,
  listSlots: NonNullable<Driver['listSlots']>,
): Promise<{ recorded: Recorded[]; failed: GcAction[] }> {
  const resources = await pass.db
    .selectFrom('resources')
    .selectAll()
    .where('blueprint_id', '=', blueprint.id)
    .where('state', 'in', statesAccepting('resource', 'destroy_orphan'))
    .orderBy('id')
    .execute();
  const listed: Array<ListedSlot & { readonly resourceId: number }> = [];
  const failed: GcAction[] = [];
  /** Resources not listed (a listing failed, or the pass ran out of time): their slots' rows stay as they were. */
  const kept: number[] = [];
  for (const resource of resources) {
    if (pass.outOfTime) {
      kept.push(resource.id);
      continue;
    }
    const slots = await listing(
      `resource:${resource.id}`,
      'listSlots',
      `the slots the ${blueprint.driver} driver holds on it`,
      async () => (await listSlots({ blueprint: driverBlueprint(blueprint), resource: driverResource(resource) })).slots,
    );
    if ('failed' in slots) {
      failed.push(slots.failed);
      kept.push(resource.id);
    } else listed.push(...slots.listed.map((s) => ({ ...s, resourceId: resource.id })));
  }
  return { recorded: await recordOrphanedSlots(pass.db, blueprint.id, listed, kept, pass.settings.orphanGraceMs), failed };
}

/**
 * Compares the slots listed with the rows that hold them and rewrites the
 * blueprint's orphaned slots from it, in one transaction: the unmatched are
 * upserted (seen once more), the rest of its slot rows go, but those of the
 * resources `kept` (not listed this pass). Answers the unmatched.
 */
async function recordOrphanedSlots(
  db: Db,
  blueprintId: BlueprintRow['id'],
  listed: ReadonlyArray<ListedSlot & { readonly resourceId: number }>,
  kept: readonly ResourceRow['id'][],
  graceMs: number,
): Promise<Recorded[]> {
  const grace = sql`make_interval(secs => ${graceMs / 1000}::float8)`;
  return withTransaction(db, async (trx) => {
    const { rows } = await sql<Recorded>`
      with listed as (
        select l.id, l."resourceId" as resource_id, l.slot
        from jsonb_to_recordset(${JSON.stringify(listed)}::jsonb) as l (id text, "resourceId" bigint, slot int)
      ), unmatched as (
        select l.* from listed l
        where not exists (select 1 from resource_slots s where s.resource_id = l.resource_id and s.slot = l.slot)
          and not exists (select 1 from leases le where le.resource_id = l.resource_id and le.slot = l.slot
                            and (le.state <> 'destroyed' or le.updated_at > now() - ${grace}))
      ), gone as (
        delete from orphans o where o.blueprint_id = ${blueprintId} and o.slot is not null
          and o.external_id not in (select id from unmatched) and o.resource_id <> all(${sql.val(kept)}::bigint[])
      ), seen as (
        insert into orphans as o (blueprint_id, external_id, resource_id, slot)
        select ${blueprintId}, u.id, u.resource_id, u.slot from unmatched u
        on conflict (blueprint_id, external_id) do update
          set resource_id = excluded.resource_id, slot = excluded.slot, attributes = '{}', last_seen_at = now(), passes = o.passes + 1
        returning o.external_id, o.resource_id, o.slot, o.passes, o.first_seen_at
      )
      select s.external_id, s.resource_id, s.slot, s.passes, s.first_seen_at,
        s.passes >= 2 and s.first_seen_at <= now() - ${grace} as confirmed,
        exists (select 1 from commands c
          where c.target_kind = 'resource' and c.target_id = s.resource_id and c.kind = 'destroy_orphan'
            and c.status in ('queued', 'running') and c.payload ->> 'orphan' = s.external_id) as asked
      from seen s
      order by s.external_id
    `.execute(trx);
    return rows;
  });
}
