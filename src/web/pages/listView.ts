import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { PageQuery } from '../../api/schemas.ts';
import type { Page } from '../../read/page.ts';
import { blank } from '../forms.ts';
import { type Column, dataTable } from '../dataTable.ts';
import { html, type SafeHtml } from '../html.ts';

/** `?limit=&after=` of every list, with empty fields (from the filter form) read as absent. */
export const ListPaging = { limit: blank(PageQuery.limit), after: blank(PageQuery.after) };

/** A filter field of a list's form: a choice among fixed values, or free text. */
export type FilterField =
  | { readonly name: string; readonly label: string; readonly options: readonly string[] }
  | { readonly name: string; readonly label: string; readonly placeholder: string };

export interface ListView<T> {
  readonly title: string;
  readonly path: string;
  readonly filters: readonly FilterField[];
  readonly columns: readonly Column<T>[];
  readonly page: Page<T>;
  /** The row's anchor id, if rows are linked to (the blueprints list). */
  readonly rowId?: (row: T) => string;
}

/**
 * A list page's body: the filter form (a GET, so a filtered list is a link
 * to share), the rows, and keyset paging links (newest first; "next" carries
 * the last id shown, so a page costs the same however deep it is).
 */
export function renderList<T>(request: FastifyRequest, view: ListView<T>): SafeHtml {
  const given = new URL(request.url, 'http://x').searchParams;
  const kept = new URLSearchParams([...given].filter(([name, value]) => name !== 'after' && value !== ''));
  const nextHref = view.page.next === null ? undefined : `${view.path}?${withParam(kept, 'after', String(view.page.next))}`;
  return html`<h1>${view.title}</h1>
${
  view.filters.length > 0
    ? html`<form class="filters" method="get" action="${view.path}">
${view.filters.map((field) => filterInput(field, given.get(field.name) ?? ''))}
${given.get('limit') ? html`<input type="hidden" name="limit" value="${given.get('limit')}">` : ''}
<button type="submit">Filter</button> <a href="${view.path}">Clear</a>
</form>`
    : ''
}
${view.page.items.length === 0 ? html`<p class="muted">Nothing matches.</p>` : dataTable(view.columns, view.page.items, view.rowId)}
<nav class="pager" aria-label="pages">
${given.has('after') ? html`<a href="${view.path}${kept.size > 0 ? `?${kept}` : ''}">First page</a>` : ''}
${nextHref ? html`<a href="${nextHref}" rel="next">Next page</a>` : ''}
</nav>`;
}

function withParam(params: URLSearchParams, name: string, value: string): URLSearchParams {
  const copy = new URLSearchParams(params);
  copy.set(name, value);
  return copy;
}

function filterInput(field: FilterField, value: string): SafeHtml {
  if ('options' in field) {
    return html`<label>${field.label}<select name="${field.name}">
<option value="">any</option>
${field.options.map((option) => html`<option${option === value ? html` selected` : ''}>${option}</option>`)}
</select></label>`;
  }
  return html`<label>${field.label}<input type="text" name="${field.name}" value="${value}" placeholder="${field.placeholder}"></label>`;
}

/** A free-text filter's schema: empty is absent. */
export function textFilter(max = 200) {
  return blank(z.string().trim().min(1).max(max).optional());
}
