import { spawn, execFileSync } from 'node:child_process';
import { chmod, cp, mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { shellBlocks, type ShellBlock } from './shellBlocks.ts';

/**
 * Every shell example of the README and docs/ runs as written, in this
 * order, on a fresh copy of the checkout: the README's "Try it" starts
 * `npm start` (in the background, as it says) and the later examples talk to
 * it. Each ```sh or ```bash block is its own `bash -e -o pipefail` script
 * and must exit 0; a block preceded by `<!-- example not run: reason -->` is
 * left out. The copy has its own .slipway/ (so its own embedded PostgreSQL
 * and admin token) and the service its own port (SLIPWAY_API_PORT, which the
 * examples follow), so nothing is shared with a running Slipway.
 */
const PAGES = [
  'README.md',
  'docs/api.md',
  'docs/client.md',
  'docs/cli.md',
  'docs/ci.md',
  'docs/callbacks.md',
  'docs/drivers.md',
  'docs/operations.md',
  'docs/scheduling.md',
  'docs/web-ui.md',
  'docs/concepts.md',
  'docs/guarantees.md',
  'docs/internals.md',
  'docs/benchmark.md',
  'docs/development.md',
  'docs/known-limits.md',
];

const blocks: ShellBlock[] = [];
for (const page of PAGES) blocks.push(...(await shellBlocks(page)));

let checkout: string;
let env: NodeJS.ProcessEnv;
/** Process groups the blocks started (each block is a group leader), stopped at the end: `npm start` among them. */
const groups: number[] = [];

beforeAll(async () => {
  checkout = await mkdtemp(path.join(tmpdir(), 'slipway-examples-'));
  // Readable by all, like a clone: run as root, PostgreSQL runs as the postgres user.
  await chmod(checkout, 0o755);
  await copyCheckout(checkout);
  env = { ...withoutSlipwaySettings(process.env), SLIPWAY_API_PORT: String(await freePort()) };
});

afterAll(async () => {
  await Promise.all(groups.map(stopGroup));
  if (checkout) await rm(checkout, { recursive: true, force: true });
}, 60_000);

test('every page with shell examples is in the run', async () => {
  const pages = ['README.md', ...(await readdir('docs', { recursive: true })).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const withExamples = [];
  for (const page of pages) if ((await shellBlocks(page)).length > 0) withExamples.push(page);
  expect(withExamples.filter((page) => !PAGES.includes(page))).toEqual([]);
});

describe.sequential('the shell examples, in order', () => {
  for (const block of blocks) {
    test(`${block.page}:${block.line}`, async () => {
      const run = await runBlock(block.script);
      expect(
        run.code,
        `${block.page}:${block.line} exited ${run.code}\n--- script\n${block.script}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`,
      ).toBe(0);
    });
  }
});

/** Runs one block; resolves when its shell exits (anything it started in the background runs on). */
function runBlock(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], { cwd: checkout, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  groups.push(child.pid!);
  let stdout = '';
  let stderr = '';
  // Keep reading for as long as anything in the group writes, so a
  // background `npm start` never blocks on a full pipe.
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The checkout's files as git sees them (committed or not, without what .gitignore leaves out), its node_modules, and the build. */
async function copyCheckout(to: string): Promise<void> {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { encoding: 'utf8' })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    await mkdir(path.join(to, path.dirname(file)), { recursive: true });
    await cp(file, path.join(to, file), { verbatimSymlinks: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error; // deleted but not yet committed
    });
  }
  await symlink(path.resolve('node_modules'), path.join(to, 'node_modules'));
  // What `npm install` does in a fresh clone after installing the packages (its prepare step): `npm start` runs the build.
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: to, stdio: 'ignore' });
}

/** The environment of a fresh shell: no DATABASE_URL or SLIPWAY_* setting of the test run leaks into the examples. */
function withoutSlipwaySettings(from: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(from).filter(([name]) => name !== 'DATABASE_URL' && !name.startsWith('SLIPWAY_')));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** SIGTERM to a block's process group (a clean stop for `npm start`), then wait until the group is gone. */
async function stopGroup(pgid: number): Promise<void> {
  const alive = () => {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(-pgid, 'SIGTERM');
  for (let waited = 0; alive() && waited < 30_000; waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (alive()) process.kill(-pgid, 'SIGKILL');
}
