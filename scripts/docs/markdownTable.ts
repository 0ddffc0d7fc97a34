/** A cell's text with the pipes that would end it escaped. */
export const escapeCell = (text: string) => text.replaceAll('|', '\\|');

/** A Markdown table; cells are written as given (escapeCell those that may hold a pipe). */
export function markdownTable(header: string[], rows: string[][]): string {
  return [header, header.map(() => '---'), ...rows].map((row) => `| ${row.join(' | ')} |`).join('\n');
}
