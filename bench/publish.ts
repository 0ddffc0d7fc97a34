import { copyFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { latestFiguresFile, readFigures } from './figures.ts';
import { RESULTS_DIR, resultsName, TIMELINESS_RESULTS_DIR, unpublishable } from './results.ts';
import { overriddenSettings } from './settings.ts';
import { readTimelinessFigures, TIMELINESS_PREFIX } from './timeliness.ts';

/**
 * `npm run bench:publish [file]`: copies a run's figures file (by default
 * the newest under .slipway/bench) to bench/results/, named by its server
 * (embedded-postgresql-17.json, postgresql-15.json), replacing that
 * server's earlier results. `npm run docs` then writes docs/benchmark.md's
 * table from every file there. A file of the time-driven work's run
 * (bench/runTimeliness.ts, `timeliness-<start>.json`) goes to
 * bench/results/timeliness/ the same way, for that section's table.
 */
const file = process.argv[2] ?? (await latestFiguresFile());
if (!file) throw new Error('no figures file: give its path, or run `npm run bench` first');
if (path.basename(file).startsWith(TIMELINESS_PREFIX)) {
  const timeliness = await readTimelinessFigures(file);
  const problem = unpublishable(await readFile(file, 'utf8'));
  if (problem) throw new Error(`${file} is not published: ${problem}`);
  await mkdir(TIMELINESS_RESULTS_DIR, { recursive: true });
  const target = path.join(TIMELINESS_RESULTS_DIR, resultsName(timeliness.server));
  await copyFile(file, target);
  console.log(
    `${path.relative(process.cwd(), file)} → ${path.relative(process.cwd(), target)}; now \`npm run docs\` writes docs/benchmark.md's table`,
  );
  process.exit(0);
}
const figures = await readFigures(file);
const problem = unpublishable(await readFile(file, 'utf8'));
if (problem) throw new Error(`${file} is not published: ${problem}`);

const overridden = overriddenSettings(figures.settings);
if (overridden.length > 0) console.warn(`note: this run's sizes are not the issue's (${overridden.join(' ')}); the docs table says so`);
if (figures.machine.revision.endsWith('-dirty')) console.warn(`note: the run measured uncommitted changes (${figures.machine.revision})`);

await mkdir(RESULTS_DIR, { recursive: true });
const target = path.join(RESULTS_DIR, resultsName(figures.server));
await copyFile(file, target);
console.log(`${path.relative(process.cwd(), file)} → ${path.relative(process.cwd(), target)}; now \`npm run docs\` writes docs/benchmark.md's table`);
