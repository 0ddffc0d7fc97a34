import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const CHECKOUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The package as a user installs it. */
export interface InstalledPackage {
  /** The `--prefix` it is installed under: `slipway` is in its bin/. */
  readonly prefix: string;
  /** The installed `slipway` executable. */
  readonly bin: string;
  /** The package's own directory (lib/node_modules/slipway). */
  readonly packageDir: string;
}

/**
 * Packs this checkout (`npm pack`, whose prepare step builds dist/) into
 * `dir` and installs the tarball with `npm install --global` into
 * `dir`/prefix, as on a machine of its own. `dir` must be readable by all
 * when run as root: the embedded PostgreSQL then runs as the postgres user,
 * which must reach its binaries in the prefix.
 */
export async function installPackedPackage(dir: string): Promise<InstalledPackage> {
  const prefix = path.join(dir, 'prefix');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: CHECKOUT, env: userEnv(), maxBuffer: 64 * 1024 * 1024 });
  const tarball = path.join(dir, (JSON.parse(stdout) as { filename: string }[])[0]!.filename);
  await run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: dir, env: userEnv() });
  return { prefix, bin: path.join(prefix, 'bin', 'slipway'), packageDir: path.join(prefix, 'lib', 'node_modules', 'slipway') };
}

/** The environment of a user's shell: no setting of the test run's, nor of the npm that may have started it. */
export function userEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name]) => name !== 'DATABASE_URL' && !name.startsWith('SLIPWAY_') && !/^npm_/i.test(name)),
  );
}
