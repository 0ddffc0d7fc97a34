// `npm run build`, and the prepare step of `npm install` in a checkout: the
// JavaScript that the installed package and `npm start` run, in dist/
// (docs/decisions/0033-compiled-package.md, 0034-bundled-build.md). esbuild
// bundles Slipway's modules, and zod with the one package that must share its
// copy, into a few files; tsc writes the client library's declarations.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { sourceStamps } from '../src/cli/builtFrom.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');

/**
 * The packages bundled in. zod's 99 modules are most of what a remote call
 * would otherwise resolve and read at start-up; fastify-type-provider-zod
 * must use that same copy, or the OpenAPI document would miss what the
 * schemas register with zod. Every other package stays in node_modules:
 * some resolve files of their own at run time (pino's transports, the
 * embedded server's binaries, pg's internals).
 */
const BUNDLED_PACKAGES = new Set(['zod', 'fastify-type-provider-zod']);

/** The modules a process starts from: the CLI (the service included), and `slipway/client`. */
const ENTRY_POINTS = ['src/cli/main.ts', 'src/client/index.ts'];

// Taken before building: a file saved meanwhile then differs from its stamp,
// and the build counts as stale rather than silently current.
const sources = sourceStamps(root);
// Nothing of an earlier build survives (the output of a module since deleted).
rmSync(dist, { recursive: true, force: true });

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });

const bundled = await build({
  absWorkingDir: root,
  entryPoints: ENTRY_POINTS,
  outbase: '.',
  outdir: dist,
  // Shared modules and the ones a call imports on demand (a subcommand, the
  // service) go to chunks of their own, so a call still loads what it runs.
  splitting: true,
  chunkNames: 'src/chunks/[name]-[hash]',
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Readable output: a stack trace from the service names real functions and lines.
  minify: false,
  metafile: true,
  logLevel: 'warning',
  plugins: [
    { name: 'packages-stay-installed', setup: (b) => b.onResolve({ filter: /^[^./]/ }, externalUnlessBundled) },
    { name: 'zod-in-english', setup: (b) => b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, englishOnly) },
  ],
});

// What esbuild does not bundle but the runtime reads: the launcher and its
// helper (plain JavaScript), the web UI's assets; not the helper's declarations.
for (const entry of readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts') || entry.name.endsWith('.d.mts')) continue;
  const relative = path.relative(root, path.join(entry.parentPath ?? entry.path, entry.name));
  cpSync(path.join(root, relative), path.join(dist, relative));
}

writeFileSync(path.join(dist, 'build.json'), `${JSON.stringify({ commit: commitOf(root), sources }, null, 2)}\n`);
writeFileSync(path.join(dist, 'modules.json'), `${JSON.stringify(modulesByOutput(bundled.metafile), null, 1)}\n`);

/** A bare import (a package or a Node.js built-in) stays an import, unless its package is bundled. */
function externalUnlessBundled({ path: specifier }) {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return BUNDLED_PACKAGES.has(name) ? undefined : { path: specifier, external: true };
}

/**
 * zod's index of its 60-odd languages, cut to the English that its
 * messages default to (and that Slipway's errors are written in): half of
 * zod's code, which every call would otherwise read and compile.
 */
function englishOnly(args) {
  return { contents: "export { default as en } from './en.js';\n", loader: 'js', resolveDir: path.dirname(args.path) };
}

/**
 * Each file written (relative to dist/) with the source modules it holds
 * (relative to the package): which modules a call loaded, for the package
 * test, and for anyone reading a stack trace.
 */
function modulesByOutput(metafile) {
  const outputs = {};
  for (const [output, { inputs }] of Object.entries(metafile.outputs)) {
    outputs[path.relative(dist, path.join(root, output))] = Object.keys(inputs).sort();
  }
  return outputs;
}

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
