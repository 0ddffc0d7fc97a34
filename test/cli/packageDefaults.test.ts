import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { sourceStamps, staleBuild } from '../../src/cli/builtFrom.mjs';
import { defaultHome } from '../../src/config.ts';

test('SLIPWAY_HOME defaults to .slipway in a checkout, else to the XDG data directory, or /var/lib/slipway for root', () => {
  const user = 1000;
  expect(defaultHome({}, true, user)).toBe('.slipway');
  expect(defaultHome({ XDG_DATA_HOME: '/data' }, true, 0)).toBe('.slipway');
  expect(defaultHome({ XDG_DATA_HOME: '/data' }, false, user)).toBe('/data/slipway');
  expect(defaultHome({}, false, user)).toBe(path.join(os.homedir(), '.local', 'share', 'slipway'));
  // The XDG spec: a relative XDG_DATA_HOME is invalid, and ignored.
  expect(defaultHome({ XDG_DATA_HOME: 'data' }, false, user)).toBe(path.join(os.homedir(), '.local', 'share', 'slipway'));
  expect(defaultHome({ XDG_DATA_HOME: '/data' }, false, 0)).toBe('/var/lib/slipway');
});

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'slipway-built-from-'));
  for (const dir of ['src/cli', 'src/tasks', 'migrations', 'dist']) await mkdir(path.join(root, dir), { recursive: true });
  for (const file of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'src/cli/main.ts', 'migrations/index.ts', 'src/tasks/task.ts']) {
    await writeFile(path.join(root, file), `// ${file}\n`);
  }
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/** Records the source as it is now as what dist/ was built from, as scripts/build.mjs does. */
const build = () => writeFile(path.join(root, 'dist', 'build.json'), JSON.stringify({ commit: null, sources: sourceStamps(root) }));

test('a build is stale once a source file changes, is added or is removed, and names that file', async () => {
  expect(staleBuild(root)).toBe('dist/ has no record of what it was built from');
  await build();
  expect(staleBuild(root)).toBeUndefined();

  const later = new Date(Date.now() + 5000);
  await utimes(path.join(root, 'src/cli/main.ts'), later, later);
  expect(staleBuild(root)).toBe('src/cli/main.ts changed after dist/ was built');
  await build();

  await writeFile(path.join(root, 'src', 'tasks', 'new.ts'), '// new\n');
  expect(staleBuild(root)).toBe('src/tasks/new.ts is newer than dist/');
  await build();

  await rm(path.join(root, 'migrations', 'index.ts'));
  expect(staleBuild(root)).toBe('migrations/index.ts was removed after dist/ was built');
  await build();
  // A change of tsconfig.build.json changes what the build writes as much as a source file does.
  await writeFile(path.join(root, 'tsconfig.build.json'), '{}\n');
  expect(staleBuild(root)).toBe('tsconfig.build.json changed after dist/ was built');
});
