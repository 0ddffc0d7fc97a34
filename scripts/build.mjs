// `npm run build`, and the prepare step of `npm install` in a checkout: the
// JavaScript that the installed package and `npm start` run, in dist/
// (docs/decisions/0033-compiled-package.md). Plain JavaScript, so building
// needs TypeScript alone.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sourceStamps } from '../src/cli/builtFrom.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');

// Taken before compiling: a file saved while tsc runs then differs from its
// stamp, and the build counts as stale rather than silently current.
const sources = sourceStamps(root);
// Nothing of an earlier build survives (the JavaScript of a module since deleted).
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });

// What tsc does not write but the runtime loads from beside the compiled
// modules: the launcher and its helper (plain JavaScript), the web UI's assets.
for (const entry of readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
  const relative = path.relative(root, path.join(entry.parentPath ?? entry.path, entry.name));
  cpSync(path.join(root, relative), path.join(dist, relative));
}

writeFileSync(path.join(dist, 'build.json'), `${JSON.stringify({ commit: commitOf(root), sources }, null, 2)}\n`);

/** The checkout's commit, for `slipway --version` (src/version.ts); null outside a git checkout. */
function commitOf(checkout) {
  try {
    const commit = execFileSync('git', ['--git-dir', path.join(checkout, '.git'), 'rev-parse', '--short=12', 'HEAD'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .trim();
    return /^[0-9a-f]{12}$/.test(commit) ? commit : null;
  } catch {
    return null;
  }
}
