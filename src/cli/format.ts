import type { Page } from '../read/page.ts';

/** Plain-text building blocks shared by every human-readable view. */

export const NONE = '-';

/** "2025-01-31 12:00:00.123Z": UTC, to the millisecond, so entries of one instant line up. */
export function formatTime(at: Date | null | undefined): string {
  return at ? at.toISOString().replace('T', ' ') : NONE;
}

/** Milliseconds as "0.042s". */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(3)}s`;
}

export function formatJson(value: unknown): string {
  return value === null || value === undefined ? NONE : JSON.stringify(value);
}

export function targetLabel(kind: string, id: number): string {
  return `${kind}:${id}`;
}

export interface Column<T> {
  readonly header: string;
  readonly value: (row: T) => string;
}

/** Rows as aligned columns under a header; the last column runs free. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  if (rows.length === 0) return '(none)';
  const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => c.value(row)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]!.length)));
  const pad = (cell: string, i: number) => (i === columns.length - 1 ? cell : cell.padEnd(widths[i]!));
  return cells.map((line) => line.map(pad).join('  ').trimEnd()).join('\n');
}

/** Label/value pairs, aligned, indented under a heading. */
export function fields(heading: string, pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return [heading, ...pairs.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`)].join('\n');
}

/** A titled block of lines, indented. */
export function section(title: string, lines: readonly string[]): string {
  return [title, ...(lines.length === 0 ? ['(none)'] : lines).map((line) => `  ${line}`)].join('\n');
}

/** A list page, with how to ask for the next one. */
export function pageTable<T>(page: Page<T>, columns: readonly Column<T>[]): string {
  const more = page.next === null ? '' : `\n(more: add --after ${page.next})`;
  return `${table(page.items, columns)}${more}`;
}
