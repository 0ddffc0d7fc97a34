import type { Page } from '../read/page.ts';
import { formatTime as timeText } from '../domain/times.ts';
import { labelsText } from '../domain/labels.ts';

/** Plain-text building blocks shared by every human-readable view. */

export const NONE = '-';

/**
 * Control characters (C0 with newline and tab, DEL, C1) and the Unicode
 * marks that reorder what follows (bidi overrides and isolates): what a
 * terminal would act on instead of showing.
 */
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const UNPRINTABLE = new RegExp(`[${CONTROL}]`, 'g');
const UNPRINTABLE_IN_LINES = new RegExp(`(?!\\n)[${CONTROL}]`, 'g');

function escaped(char: string): string {
  const code = char.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Text shown as it is written, with every control character escaped (ESC as
 * `\x1b`, a newline as `\x0a`): reasons, holders, attributes and messages
 * come from other people, and must not put escape sequences on an
 * operator's terminal or forge lines of the output. Every building block
 * below applies it to what it is given.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, escaped);
}

/** The same for text already laid out in lines (a rendered view, a progress line): its newlines stay. */
export function printableLines(text: string): string {
  return text.replace(UNPRINTABLE_IN_LINES, escaped);
}

/**
 * `value` as JSON with nothing a terminal acts on: JSON.stringify escapes
 * C0 controls but leaves DEL, C1 controls and bidi marks raw; they can only
 * be inside strings, where `\uXXXX` reads back as the same character.
 */
export function printableJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(UNPRINTABLE_IN_LINES, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * "2025-01-31 12:00:00.123Z": UTC, to the millisecond, so entries of one
 * instant line up. Takes a Date, or the API's ISO text of one.
 */
export function formatTime(at: Date | string | null | undefined): string {
  return at ? timeText(at) : NONE;
}

/** Milliseconds as "0.042s". */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(3)}s`;
}

export function formatJson(value: unknown): string {
  return value === null || value === undefined ? NONE : JSON.stringify(value);
}

/** Labels as "gpu=a100, os=linux" (by key: stored as jsonb, their order is not the one given), or NONE. */
export function formatLabels(labels: Readonly<Record<string, string>>): string {
  return labelsText(labels) || NONE;
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
  const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => printable(c.value(row))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]!.length)));
  const pad = (cell: string, i: number) => (i === columns.length - 1 ? cell : cell.padEnd(widths[i]!));
  return cells.map((line) => line.map(pad).join('  ').trimEnd()).join('\n');
}

/** Label/value pairs, aligned, indented under a heading. */
export function fields(heading: string, pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return [printable(heading), ...pairs.map(([label, value]) => `  ${label.padEnd(width)}  ${printable(value)}`)].join('\n');
}

/** A titled block of lines, indented. */
export function section(title: string, lines: readonly string[]): string {
  return [printable(title), ...(lines.length === 0 ? ['(none)'] : lines).map((line) => `  ${printable(line)}`)].join('\n');
}

/** A list page, with how to ask for the next one. */
export function pageTable<T>(page: Page<T>, columns: readonly Column<T>[]): string {
  const more = page.next === null ? '' : `\n(more: add --after ${page.next})`;
  return `${table(page.items, columns)}${more}`;
}
