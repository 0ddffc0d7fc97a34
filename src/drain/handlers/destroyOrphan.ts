import type { Db } from '../../db/Database.ts';
import type { ListedResource } from '../../drivers/Driver.ts';
import { done, failed, type HandlerContext, type HandlerOf } from '../Handler.ts';

type Ctx = HandlerContext<'blueprint', { readonly orphan: string }>;

/** What the effect came to: the orphan removed, or why nothing was asked of the driver. */
type Removal = { readonly removed: ListedResource } | { readonly skipped: string; readonly fails?: true };

/**
 * Removes an orphan through the blueprint's driver (src/gc/findOrphans.ts
 * records them, and asks for this when the blueprint says `destroy`). Only
 * one the collector's last pass still records: what it listed is what the
 * driver is given, and an orphan a later pass found matched, or no longer
 * listed, is left alone. Repeated after a crash, the call must find the
 * orphan already gone and succeed (drivers are idempotent).
 */
async function removeAtDriver(ctx: Ctx): Promise<Removal> {
  const recorded = await ctx.db
    .selectFrom('orphans')
    .select(['external_id', 'resource_id', 'attributes'])
    .where('blueprint_id', '=', ctx.object.id)
    .where('external_id', '=', ctx.payload.orphan)
    .executeTakeFirst();
  if (!recorded) return { skipped: `"${ctx.payload.orphan}" is not an orphan the collector records (no longer listed, or matched by a resource)` };
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
    if ('skipped' in removal) return (removal.fails ? failed : done)<'blueprint'>(`nothing removed: ${removal.skipped}`);
    // Gone from the report at once, rather than at the next pass.
    await trx.deleteFrom('orphans').where('blueprint_id', '=', ctx.object.id).where('external_id', '=', removal.removed.id).execute();
    return done<'blueprint'>(`orphan "${removal.removed.id}" destroyed`, {
      events: [{ type: 'orphan_destroyed', message: `orphan "${removal.removed.id}" destroyed by the driver`, data: removal.removed }],
    });
  },
} satisfies HandlerOf<'blueprint', 'destroy_orphan'>;
