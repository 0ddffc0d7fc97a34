import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { COMPILED, PACKAGE_ROOT } from './packageRoot.ts';

let known: string | undefined;

/**
 * This Slipway's version: package.json's, plus the git commit it runs from
 * (`0.1.0+1a2b3c4d5e6f`), so that two processes of one release built from
 * different commits can be told apart in `slipway --version`, /healthz, the
 * `workers` registry and the start-up log. The TypeScript source asks git
 * about its checkout; the build says which commit it was built from, so an
 * installed package, outside any checkout, still names it. Read once per
 * process.
 */
export function slipwayVersion(): string {
  known ??= describe();
  return known;
}

function describe(): string {
  // Checked by hand rather than with zod: `slipway --version` loads nothing it can do without.
  const { version } = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version?: unknown };
  if (typeof version !== 'string' || version === '') throw new Error(`${path.join(PACKAGE_ROOT, 'package.json')} has no version`);
  const commit = COMPILED ? buildCommit() : checkoutCommit();
  return commit === undefined ? version : `${version}+${commit}`;
}

function buildCommit(): string | undefined {
  try {
    // What `npm run build` recorded beside the JavaScript it wrote (scripts/build.mjs).
    const { commit } = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'dist', 'build.json'), 'utf8')) as { commit?: unknown };
    return typeof commit === 'string' && /^[0-9a-f]{12}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}

function checkoutCommit(): string | undefined {
  try {
    // --git-dir: only this checkout's own repository, never one above it.
    const commit = execFileSync('git', ['--git-dir', path.join(PACKAGE_ROOT, '.git'), 'rev-parse', '--short=12', 'HEAD'], {
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 2000,
    })
      .toString()
      .trim();
    return /^[0-9a-f]{12}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}
