#!/usr/bin/env node
// The `slipway` executable: plain JavaScript so Node runs it as is, from any
// working directory. It runs in one of two places (docs/decisions/0033-compiled-package.md):
//
// - src/cli/bin.mjs, beside the TypeScript: the development entry, which
//   the tests run. It runs the source through tsx, so a change is live at
//   once.
// - dist/src/cli/bin.mjs, where `npm run build` copies it beside the
//   compiled JavaScript: package.json's `bin`, `npm start` and an installed
//   package run this one, with no TypeScript tool. In a checkout it first
//   checks that dist/ was built from the source as it is now; when not, it
//   says so on stderr and runs the source instead, never an older build.
import { existsSync } from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (existsSync(path.join(here, 'main.ts'))) {
  await runSource(path.join(here, 'main.ts'));
} else {
  const root = path.resolve(here, '../../..');
  const checkoutMain = path.join(root, 'src', 'cli', 'main.ts');
  // An installed package has no source to compare with: its dist/ is all there is.
  const stale = existsSync(checkoutMain) ? (await import('./builtFrom.mjs')).staleBuild(root) : undefined;
  if (stale === undefined) {
    // Node.js 22.1 and later keep V8's compiled code of the modules between
    // calls (in the system's temporary directory); Node.js 20 has no such cache.
    module.enableCompileCache?.();
    await import('./main.js');
  } else {
    process.stderr.write(`slipway: ${stale}; running the TypeScript source instead, which starts slower (npm run build updates dist/)\n`);
    await runSource(checkoutMain);
  }
}

/** Runs the CLI from its TypeScript source, compiled by tsx as it loads (a checkout's development dependency). */
async function runSource(main) {
  const { register } = await import('tsx/esm/api');
  // The packages the calls that open the database load, imported before tsx's hooks are: on Node 20
  // those hooks run on a thread of their own, and each module resolved and
  // loaded while they are registered costs round trips to it (kysely alone is
  // 262 modules). These are plain JavaScript that tsx has nothing to do for;
  // the TypeScript importing them later gets these same modules (same URLs),
  // from Node's cache. A lone `--version` loads none of them (main.ts).
  const versionOnly = process.argv.length === 3 && process.argv[2] === '--version';
  if (!versionOnly) await Promise.all([import('kysely'), import('zod'), import('commander'), import('pg'), import('pino')]);
  register();
  await import(pathToFileURL(main).href);
}
