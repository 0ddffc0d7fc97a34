import type { OrphanRow } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { ListedResource } from '../../drivers/Driver.ts';
import { done, failed, type HandlerContext, type HandlerOf, type OutcomeEvent } from '../Handler.ts';
import { send } from '../messages.ts';

type Ctx = HandlerContext<'blueprint', { readonly orphan: string }>;

/**
 * What the effect came to: the orphan removed; an orphaned slot, which its
 * resource frees (handed on to it); or why nothing was asked of the driver.
 */
type Removal =
  | { readonly removed: ListedResource }
  | { readonly slotOf: { readonly resourceId: number; readonly slot: number } }
  | { readonly skipped: string; readonly fails?: true };

/** An orphan as the collector's last pass recorded it for the blueprint, if it still does. */
export function recordedOrphan(db: Db, blueprintId: number, id: string): Promise<OrphanRow | undefined> {
  return db.selectFrom('orphans').selectAll().where('blueprint_id', '=', blueprintId).where('external_id', '=', id).executeTakeFirst();
}

/** An orphan removed: gone from the report at once, rather than at the next pass; the event the object's timeline gets. */
export async function orphanRemoved(trx: Db, blueprintId: number, id: string, message: string, data: unknown): Promise<OutcomeEvent> {
  await trx.deleteFrom('orphans').where('blueprint_id', '=', blueprintId).where('external_id', '=', id).execute();
  return { type: 'orphan_destroyed', message, data };
}

/** Why nothing was asked of the driver, as the command's outcome: done, or failed when it never can be. */
export const nothingRemoved = <K extends 'blueprint' | 'resource'>(skipped: string, fails?: true) =>
  (fails ? failed : done)<K>(`nothing removed: ${skipped}`);

/**
 * Removes an orphan through the blueprint's driver (src/gc/findOrphans.ts
 * records them, and asks for this when the blueprint says `destroy`). Only
 * one the collector's last pass still records: what it listed is what the
 * driver is given, and an orphan a later pass found matched, or no longer
 * listed, is left alone. Repeated after a crash, the call must find the
 * orphan already gone and succeed (drivers are idempotent). An orphaned
 * slot is its resource's to free (the resource's destroy_orphan, in
 * resourceHandlers.ts, which alone may tell that no lease took the slot
 * since): asked here, by an operator, it is handed on.
 */
async function removeAtDriver(ctx: Ctx): Promise<Removal> {
  const recorded = await recordedOrphan(ctx.db, ctx.object.id, ctx.payload.orphan);
  if (!recorded) return { skipped: `"${ctx.payload.orphan}" is not an orphan the collector records (no longer listed, or matched by a resource)` };
  if (recorded.slot !== null) return { slotOf: { resourceId: Number(recorded.resource_id), slot: recorded.slot } };
  const driver = ctx.driver();
  if (!driver.destroyOrphan) return { skipped: `the ${ctx.object.driver} driver of this blueprint cannot destroy orphans`, fails: true };
  const orphan: ListedResource = {
    id: recorded.external_id,
    ...(recorded.resource_id === null ? {} : { resourceId: Number(recorded.resource_id) }),
    attributes: recorded.attributes as ListedResource['attributes'],
  };
  await driver.destroyOrphan({ ...ctx.call, orphan });
  return { removed: orphan };
}

export const destroyOrphan = {
  shape: 'effectful',
  readsInTransaction: true,
  effect: removeAtDriver,
  async decide(trx: Db, ctx: Ctx, removal: Removal) {
    if ('skipped' in removal) return nothingRemoved<'blueprint'>(removal.skipped, removal.fails);
    const { orphan } = ctx.payload;
    if ('slotOf' in removal) {
      const { resourceId, slot } = removal.slotOf;
      return done<'blueprint'>(`orphan "${orphan}" is slot ${slot} of resource ${resourceId}: asked the resource to free it`, {
        followUps: [send.resource.destroy_orphan(resourceId, { orphan }, `blueprint ${ctx.object.name} was asked to destroy orphan "${orphan}"`)],
      });
    }
    const event = await orphanRemoved(trx, ctx.object.id, orphan, `orphan "${orphan}" destroyed by the driver`, removal.removed);
    return done<'blueprint'>(`orphan "${orphan}" destroyed`, { events: [event] });
  },
} satisfies HandlerOf<'blueprint', 'destroy_orphan'>;
