import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PackageJson = z.object({ version: z.string().min(1) });

let known: string | undefined;

/**
 * This Slipway's version: package.json's, plus the git commit it runs from
 * when it runs from a checkout (`0.1.0+1a2b3c4d5e6f`), so that two processes
 * of one release built from different commits can be told apart in
 * `slipway --version`, /healthz, the `workers` registry and the start-up log.
 * Read once per process.
 */
export function slipwayVersion(): string {
  known ??= describe();
  return known;
}

function describe(): string {
  const { version } = PackageJson.parse(JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')));
  try {
    // --git-dir: only this checkout's own repository, never one above it.
    const commit = execFileSync('git', ['--git-dir', `${ROOT}/.git`, 'rev-parse', '--short=12', 'HEAD'], {
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 2000,
    })
      .toString()
      .trim();
    return /^[0-9a-f]{12}$/.test(commit) ? `${version}+${commit}` : version;
  } catch {
    return version;
  }
}
