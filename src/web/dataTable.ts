import { html, type Renderable, type SafeHtml } from './html.ts';

/** A column of a data table: its header, and what a row shows in it. */
export interface Column<T> {
  readonly header: string;
  readonly cell: (row: T) => Renderable;
  /** A class for the column's cells (the command tree's indented first column). */
  readonly className?: string;
}

/**
 * The web UI's one table of rows: a header per column, a row per item. Each
 * cell carries its column's header (`data-label`), so on a phone (app.css)
 * a row is shown as a card of labelled lines instead of a table wider than
 * the screen. `rowId`: the row's anchor id, where rows are linked to.
 */
export function dataTable<T>(columns: readonly Column<T>[], rows: readonly T[], rowId?: (row: T) => string): SafeHtml {
  return html`<div class="table-wrap"><table class="data">
<thead><tr>${columns.map((c) => html`<th scope="col">${c.header}</th>`)}</tr></thead>
<tbody>${rows.map(
    (row) =>
      html`<tr${rowId ? html` id="${rowId(row)}"` : ''}>${columns.map(
        (c) => html`<td data-label="${c.header}"${c.className ? html` class="${c.className}"` : ''}>${c.cell(row)}</td>`,
      )}</tr>`,
  )}</tbody>
</table></div>`;
}
