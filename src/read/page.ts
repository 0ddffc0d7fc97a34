import { sql, type SelectQueryBuilder } from 'kysely';

export interface PageRequest {
  /** Only rows with an id greater than this. */
  readonly after?: number;
  readonly limit: number;
}

export interface Page<T> {
  readonly items: T[];
  /** The `after` that fetches the next page, or null on the last one. */
  readonly next: number | null;
}

/**
 * One page of a list, keyset-paginated on an id column: unlike an offset, a
 * page stays stable while new rows are appended. Fetches one row more than
 * asked to learn whether there is a next page.
 */
export async function fetchPage<DB, TB extends keyof DB, O extends { id: number }>(
  query: SelectQueryBuilder<DB, TB, O>,
  idColumn: string,
  page: PageRequest,
): Promise<Page<O>> {
  const rows = await query
    .$if(page.after !== undefined, (q) => q.where(sql<boolean>`${sql.ref(idColumn)} > ${page.after}`))
    .orderBy(sql.ref(idColumn))
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit) as O[];
  return { items, next: rows.length > page.limit ? items[items.length - 1]!.id : null };
}
