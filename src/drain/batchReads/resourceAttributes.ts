import { compiledOnce } from '../../db/compiledOnce.ts';
import type { Db } from '../../db/Database.ts';
import { executePrepared } from '../../db/PreparingClient.ts';
import type { BatchRead } from '../Handler.ts';

export interface ResourceIdentity {
  readonly id: number;
  readonly attributes: Record<string, unknown>;
}

/**
 * The resource a lease's driver call is about, for every lease of a step at
 * once: the resource its grant names, or the one it holds.
 */
export function resourceAttributes<C>(keyOf: (ctx: C) => number | undefined): BatchRead<ResourceIdentity, C> {
  return { key: keyOf, load: loadResourceAttributes };
}

/** Read at every grant and release: compiled once, and prepared on each connection (executePrepared), as its parsing and planning cost the server more than running it. */
const readAttributes = compiledOnce(
  (db, ids: readonly number[]) =>
    db
      .selectFrom('resources')
      .select(['id', 'attributes'])
      .where('id', '=', (eb) => eb.fn.any(eb.val(ids))),
  [],
);

async function loadResourceAttributes(db: Db, ids: readonly number[]): Promise<ReadonlyMap<number, ResourceIdentity>> {
  const rows = await executePrepared(db, readAttributes(ids));
  return new Map(rows.map((r) => [r.id, { id: r.id, attributes: r.attributes as Record<string, unknown> }]));
}
