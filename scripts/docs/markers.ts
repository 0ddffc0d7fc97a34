import { readFile } from 'node:fs/promises';
import { GENERATED_SECTIONS } from './generatedSections.ts';

/** A page as committed and as `npm run docs` would write it now. */
export interface PageRender {
  page: string;
  committed: string;
  generated: string;
}

const start = (name: string) => `<!-- generated: ${name} (npm run docs; do not edit by hand) -->`;
const end = (name: string) => `<!-- end generated: ${name} -->`;

/** Every page with generated sections, with those sections written afresh between their markers. */
export async function renderGeneratedPages(): Promise<PageRender[]> {
  const pages = [...new Set(Object.values(GENERATED_SECTIONS).map((s) => s.page))];
  return Promise.all(
    pages.map(async (page) => {
      const committed = await readFile(page, 'utf8');
      let generated = committed;
      for (const [name, section] of Object.entries(GENERATED_SECTIONS)) {
        if (section.page === page) generated = replaceBetweenMarkers(generated, page, name, await section.render());
      }
      return { page, committed, generated };
    }),
  );
}

function replaceBetweenMarkers(text: string, page: string, name: string, content: string): string {
  const from = text.indexOf(start(name));
  const to = text.indexOf(end(name));
  if (from < 0 || to < from) {
    throw new Error(`${page} has no generated section "${name}": expected the lines\n${start(name)}\n${end(name)}`);
  }
  return `${text.slice(0, from)}${start(name)}\n\n${content}\n\n${text.slice(to)}`;
}
