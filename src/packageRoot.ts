import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where Slipway's package.json is. The TypeScript source sits at the root
 * (src/packageRoot.ts); the build's JavaScript one level deeper
 * (dist/src/packageRoot.js), both in a checkout and in an installed package.
 */
export const COMPILED = !import.meta.url.endsWith('.ts');
export const PACKAGE_ROOT = fileURLToPath(new URL(COMPILED ? '../..' : '..', import.meta.url));

/**
 * True in a checkout (the TypeScript source is there), false in a package
 * installed from `npm pack`'s tarball, which holds the build alone. Some
 * defaults differ: where the data lives (SLIPWAY_HOME), and where the
 * version's commit comes from.
 */
export const IN_CHECKOUT = existsSync(path.join(PACKAGE_ROOT, 'src', 'cli', 'main.ts'));
