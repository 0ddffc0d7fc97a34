import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CHECKOUT, installPackedPackage, userEnv } from '../test/helpers/packedPackage.ts';
import { gitRevision } from './machine.ts';
import { unpublishable } from './results.ts';
import { STARTUP_FIGURES_FILE, type StartupFigures, type StartupRow } from './startupFigures.ts';

/**
 * `npm run bench:startup [-- --publish]`: how long a `slipway` call takes,
 * from its start to its exit, as a user or a CI job meets it (see
 * docs/benchmark.md, "Start-up"). It packs the checkout and installs the
 * tarball into a prefix of its own, starts that package's `slipway start`
 * on an embedded PostgreSQL under a temporary SLIPWAY_HOME, and times each
 * command line below RUNS times, in turns (one of each, then again), so that
 * whatever else runs on the machine weighs on every row alike; `node -e 0`,
 * in the same turns, is the floor no Node.js program goes below. It prints
 * the figures and writes them to .slipway/bench/; `--publish` also writes
 * them to bench/results/startup/, which `npm run docs` renders.
 */
const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 21);
/** Calls of each command before the timed ones: the page cache holds the files, and npm's own cache is warm. */
const WARM_UP = 2;
const publish = process.argv.includes('--publish');

const startedAt = new Date().toISOString();
const dir = await mkdtemp(path.join(os.tmpdir(), 'slipway-startup-'));
// Readable by all: run as root, the embedded PostgreSQL runs as the postgres user.
await chmod(dir, 0o755);
let service: ReturnType<typeof spawn> | undefined;
try {
  console.log('packing the checkout and installing the tarball...');
  const installed = await installPackedPackage(dir);
  const env: NodeJS.ProcessEnv = {
    ...userEnv(),
    PATH: `${path.join(installed.prefix, 'bin')}:${process.env.PATH}`,
    SLIPWAY_HOME: path.join(dir, 'home'),
    SLIPWAY_API_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  const cwd = path.join(dir, 'work');
  await mkdir(cwd);
  const slipway = (args: string[], extra: NodeJS.ProcessEnv = {}) => call('slipway', args, { cwd, env: { ...env, ...extra } });

  console.log('starting the installed package: slipway start...');
  service = spawn('slipway', ['start'], { cwd, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await serviceUrl(service);
  // One resource whose slots are never all taken: every lease finds a free one.
  await slipway([
    'blueprint',
    'create',
    '--name',
    'startup',
    '--driver',
    'directory',
    '--setting',
    `root=${path.join(dir, 'sandboxes')}`,
    '--max-resources',
    '1',
    '--leases-per-resource',
    '1000',
  ]);
  const lease = JSON.parse((await slipway(['--json', 'lease', 'create', '--blueprint', 'startup'])).stdout).lease.id as number;
  const token = JSON.parse((await slipway(['--json', 'token', 'create', '--name', 'startup-bench', '--role', 'user'])).stdout).secret as string;
  const remote = { SLIPWAY_URL: url, SLIPWAY_TOKEN: token };
  // commander answers `lease run --help` with the help of `lease` when it has no `run`.
  const help = await run('slipway', ['lease', 'run', '--help'], { cwd, env });
  const leaseRun = help.code === 0 && help.stdout.includes('Usage: slipway lease run');

  const rows: Row[] = [
    { label: '`node -e 0` (the floor)', command: [process.execPath, '-e', '0'], cwd, env },
    { label: 'installed `slipway --version`', command: ['slipway', '--version'], cwd, env, target: 0.25 },
    {
      label: 'installed `slipway lease show N`, remote',
      command: ['slipway', 'lease', 'show', String(lease)],
      cwd,
      env: { ...env, ...remote },
      target: 0.35,
    },
    ...(leaseRun
      ? [
          {
            label: 'installed `slipway lease run --blueprint B -- true`, remote, a free slot',
            command: ['slipway', 'lease', 'run', '--blueprint', 'startup', '--', 'true'],
            cwd,
            env: { ...env, ...remote },
            target: 1,
          },
        ]
      : []),
    // In a checkout, as the README's "Try it" calls it, and its parts.
    { label: 'checkout: `npx slipway --version`', command: ['npx', 'slipway', '--version'], cwd: CHECKOUT, env: userEnv() },
    {
      label: 'checkout: `node dist/src/cli/bin.mjs --version`',
      command: [process.execPath, 'dist/src/cli/bin.mjs', '--version'],
      cwd: CHECKOUT,
      env: userEnv(),
    },
    {
      label: 'checkout: `node src/cli/bin.mjs lease show N`, remote (the source, through tsx)',
      command: [process.execPath, 'src/cli/bin.mjs', 'lease', 'show', String(lease)],
      cwd: CHECKOUT,
      env: { ...userEnv(), ...remote },
    },
  ];
  if (!leaseRun)
    console.log('skipped: `slipway lease run` (the installed package has no such subcommand: `slipway lease run --help` shows no help of its own)');

  const loadAverage = os.loadavg()[0]!;
  for (const row of rows) for (let n = 0; n < WARM_UP; n++) await timed(row);
  const seconds = rows.map(() => [] as number[]);
  for (let n = 0; n < RUNS; n++) for (const [i, row] of rows.entries()) seconds[i]!.push(await timed(row));

  const figures: StartupFigures = {
    startedAt,
    machine: {
      cores: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
      node: process.version,
      revision: gitRevision(),
      loadAverage,
    },
    loadAverageAtEnd: os.loadavg()[0]!,
    runs: RUNS,
    rows: rows.map((row, i): StartupRow => {
      const sorted = [...seconds[i]!].sort((a, b) => a - b);
      return {
        label: row.label,
        p50: quantile(sorted, 0.5),
        min: sorted[0]!,
        p90: quantile(sorted, 0.9),
        ...(row.target === undefined ? {} : { target: row.target }),
      };
    }),
    ...(leaseRun ? {} : { skipped: ['`slipway lease run`: not in this build'] }),
  };
  const text = `${JSON.stringify(figures, null, 2)}\n`;
  for (const row of figures.rows) {
    const verdict = row.target === undefined ? '' : ` (target ≤ ${row.target} s: ${row.p50 <= row.target ? 'met' : 'MISSED'})`;
    console.log(`${row.label}: p50 ${row.p50.toFixed(3)} s, min ${row.min.toFixed(3)}, p90 ${row.p90.toFixed(3)}${verdict}`);
  }
  console.log(`load average ${figures.machine.loadAverage.toFixed(1)} → ${figures.loadAverageAtEnd.toFixed(1)}`);
  const outDir = path.join(CHECKOUT, '.slipway', 'bench');
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, `startup-${figures.startedAt.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, text);
  console.log(`figures: ${path.relative(process.cwd(), file)}`);
  if (publish) {
    const problem = unpublishable(text);
    if (problem) throw new Error(`not published: ${problem}`);
    await mkdir(path.dirname(STARTUP_FIGURES_FILE), { recursive: true });
    await writeFile(STARTUP_FIGURES_FILE, text);
    console.log(`published: ${path.relative(process.cwd(), STARTUP_FIGURES_FILE)}; now \`npm run docs\` writes docs/benchmark.md's table`);
  }
} finally {
  if (service && service.exitCode === null) {
    const exited = new Promise((resolve) => service!.once('exit', resolve));
    service.kill('SIGTERM');
    await exited;
  }
  await rm(dir, { recursive: true, force: true });
}

interface Row {
  readonly label: string;
  readonly command: string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** The bar for its p50, in seconds. */
  readonly target?: number;
}

/** One call's wall time, from spawning it to its exit, in seconds; a call that fails stops the run. */
async function timed(row: Row): Promise<number> {
  const started = process.hrtime.bigint();
  const result = await run(row.command[0]!, row.command.slice(1), { cwd: row.cwd, env: row.env });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.code !== 0) throw new Error(`${row.command.join(' ')} exited ${result.code}: ${result.stderr.trim()}`);
  return seconds;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function call(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<{ stdout: string }> {
  const result = await run(command, args, options);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.code}: ${result.stderr.trim()}`);
  return result;
}

/** The URL `slipway start` serves its API on, once it says so. */
function serviceUrl(child: ReturnType<typeof spawn>): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const url = /^HTTP API on (\S+) /m.exec(stdout)?.[1];
      if (url) resolve(url);
    });
    child.once('exit', (code) => reject(new Error(`slipway start exited ${code} before serving its API:\n${stdout}`)));
  });
}

/** The value at quantile `q` of sorted `values` (nearest rank). */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
