import type { SelectQueryBuilder } from 'kysely';
import type { ListOrder } from './listOrder.ts';

export interface PageRequest {
  /** Only rows past this id in the page's order (greater, or smaller when newest first). */
  readonly after?: number;
  readonly limit: number;
}

/**
 * A page in either order. The web UI and the CLI show the newest first (what
 * just happened is what an operator looks for); the API lists oldest first
 * unless asked, so a script that pages through everything sees rows added
 * meanwhile at the end.
 */
export interface ListPage extends PageRequest {
  readonly order?: ListOrder;
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
  page: ListPage,
): Promise<Page<O>> {
  const newestFirst = page.order === 'newest';
  // Through the builder's own methods rather than kysely's `sql`: a module
  // that imports kysely loads all of it (262 modules), and the CLI loads this
  // one at every call. `idColumn` is the caller's, typed as the builder cannot
  // type a column named at run time.
  const id = idColumn as never;
  const rows = await query
    .$if(page.after !== undefined, (q) => q.where(id, newestFirst ? '<' : '>', page.after as never))
    .orderBy(id, newestFirst ? 'desc' : 'asc')
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit) as O[];
  return { items, next: rows.length > page.limit ? items[items.length - 1]!.id : null };
}
