import { readFile } from 'node:fs/promises';

/** One fenced shell block of a Markdown page. */
export interface ShellBlock {
  page: string;
  /** The line of its opening fence, counted from 1. */
  line: number;
  script: string;
}

/** Put on the line before a block's fence to leave it out of the run, with the reason. */
export const NOT_RUN = /^<!-- example not run: .+ -->$/;

const OPENING = /^```(sh|bash)\s*$/;

/** The ```sh and ```bash blocks of a page, in order, except those marked NOT_RUN. */
export async function shellBlocks(page: string): Promise<ShellBlock[]> {
  const lines = (await readFile(page, 'utf8')).split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!OPENING.test(lines[i]!)) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`${page}:${i + 1}: a shell block with no closing fence`);
    const before =
      lines
        .slice(0, i)
        .reverse()
        .find((l) => l.trim() !== '') ?? '';
    if (!NOT_RUN.test(before.trim())) blocks.push({ page, line: i + 1, script: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}
