import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Behaves as its first argument says: ok, fail, busy, garbage, noisy, hang. */
export const MISBEHAVE = path.join(here, 'fixtures', 'misbehave.sh');

/** The directory-backed workspace from examples/exec. */
export const WORKSPACE = path.resolve(here, '../../examples/exec/workspace.mjs');
