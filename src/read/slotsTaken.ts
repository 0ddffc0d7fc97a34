import { type RawBuilder, sql } from 'kysely';

/**
 * How many of a resource's slots are taken, as a column of a query that
 * reads `resources` as `table`: its slot rows, held or waiting to be
 * cleaned. Every reader counts them: a lease deletes its own slot row when
 * it ends, so `used_slots` is only the count as the resource last wrote it
 * (see slotsInUse in src/drain/handlers/resourceHandlers.ts). One probe of
 * the slots' primary key per resource.
 */
export function slotsTaken(table: string): RawBuilder<number> {
  return sql<number>`(select count(*) from resource_slots s where s.resource_id = ${sql.ref(`${table}.id`)})::int`;
}
