import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** True when this runs as the build's JavaScript (dist/), false as the TypeScript source. */
export const COMPILED = !import.meta.url.endsWith('.ts');

/**
 * Where Slipway's package.json is: the first folder above this module that
 * holds one. Searched for rather than counted: the source sits at
 * src/packageRoot.ts, and the build bundles it into whichever of dist/'s
 * files first needs it.
 */
export const PACKAGE_ROOT = packageRootAbove(path.dirname(fileURLToPath(import.meta.url)));

/** Where the code runs from: the package itself, or its dist/ (which keeps the source's layout below it). */
export const CODE_ROOT = COMPILED ? path.join(PACKAGE_ROOT, 'dist') : PACKAGE_ROOT;

/**
 * True in a checkout (the TypeScript source is there), false in a package
 * installed from `npm pack`'s tarball, which holds the build alone. Some
 * defaults differ: where the data lives (SLIPWAY_HOME), and where the
 * version's commit comes from.
 */
export const IN_CHECKOUT = existsSync(path.join(PACKAGE_ROOT, 'src', 'cli', 'main.ts'));

function packageRootAbove(dir: string): string {
  for (let at = dir; ; at = path.dirname(at)) {
    if (existsSync(path.join(at, 'package.json'))) return at;
    if (path.dirname(at) === at) throw new Error(`no package.json above ${dir}`);
  }
}
