import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, test } from 'vitest';
import { readFigures } from '../../bench/figures.ts';
import { resultsFiles, resultsName, TIMELINESS_RESULTS_DIR, unpublishable } from '../../bench/results.ts';
import { readStartupFigures, STARTUP_FIGURES_FILE } from '../../bench/startupFigures.ts';
import { readTimelinessFigures } from '../../bench/timeliness.ts';

test('every committed benchmark result is a figures file of this benchmark, named by its server, with no password or path of a machine', async () => {
  for (const file of await resultsFiles()) {
    const figures = await readFigures(file);
    expect(path.basename(file)).toBe(resultsName(figures.server));
    expect(unpublishable(await readFile(file, 'utf8')), file).toBeUndefined();
  }
  for (const file of await resultsFiles(TIMELINESS_RESULTS_DIR)) {
    const figures = await readTimelinessFigures(file);
    expect(path.basename(file)).toBe(resultsName(figures.server));
    expect(unpublishable(await readFile(file, 'utf8')), file).toBeUndefined();
  }
});

test('a figures file with a URL that carries a password, or a path of this machine, is not published', () => {
  expect(unpublishable('{"reproduce": "DATABASE_URL=postgres://slipway:s3cret@127.0.0.1:5432/x npm run bench"}')).toMatch(/URL with a user/);
  expect(unpublishable(`{"home": "${process.cwd()}/.slipway/bench"}`)).toMatch(/path of this machine/);
  expect(unpublishable('{"reproduce": "SLIPWAY_HOME=/srv/slipway/home npm run bench"}')).toMatch(/absolute path/);
  expect(
    unpublishable('{"server": {"version": "15.20 (Debian 15.20-0+deb12u1)"}, "reproduce": "DATABASE_URL=<same server> npm run bench"}'),
  ).toBeUndefined();
});

test('the committed start-up figures are a figures file of the start-up benchmark, with the floor measured in the same run, and no path of a machine', async () => {
  const figures = await readStartupFigures();
  expect(figures).toBeDefined();
  expect(figures!.rows[0]!.label).toMatch(/node -e 0/);
  expect(unpublishable(await readFile(STARTUP_FIGURES_FILE, 'utf8'))).toBeUndefined();
});
