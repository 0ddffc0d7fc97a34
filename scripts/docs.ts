import { writeFile } from 'node:fs/promises';
import { renderGeneratedPages } from './docs/markers.ts';

/**
 * `npm run docs`: rewrites the generated sections of docs/ (the state
 * table, the command kinds, the configuration table) from the code, and
 * the benchmark's table from bench/results/.
 */
for (const { page, committed, generated } of await renderGeneratedPages()) {
  if (generated === committed) {
    console.log(`${page}: up to date`);
  } else {
    await writeFile(page, generated);
    console.log(`${page}: rewritten`);
  }
}
