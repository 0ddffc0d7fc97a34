import path from 'node:path';
import { bars, verdict } from '../../bench/bars.ts';
import { type Cell, figureRows } from '../../bench/figureRows.ts';
import { type Figures, readFigures } from '../../bench/figures.ts';
import { resultsFiles, TIMELINESS_RESULTS_DIR } from '../../bench/results.ts';
import { type Lateness, readTimelinessFigures, timelinessBars } from '../../bench/timeliness.ts';
import { serverTitle } from '../../bench/server.ts';
import { overriddenSettings } from '../../bench/settings.ts';
import { readStartupFigures } from '../../bench/startupFigures.ts';
import { escapeCell, markdownTable } from './markdownTable.ts';

/** Where the page that holds the table is, for its links to the results files. */
const PAGE_DIR = 'docs';

/**
 * docs/benchmark.md's table of the latest figures: a column per committed
 * results file (bench/results/, one per kind of server), a row for the
 * run's circumstances, then for each figure and each bar. A figure or bar
 * one run lacks (a rate it did not offer) is blank in its column.
 */
export async function renderBenchmarkFigures(): Promise<string> {
  const files = await resultsFiles();
  if (files.length === 0) return '_No run is published yet: `npm run bench`, then `npm run bench:publish`, then `npm run docs`._';
  const runs = await Promise.all(files.map(async (file) => ({ file, figures: await readFigures(file) })));

  const about: [string, (run: { file: string; figures: Figures }) => string][] = [
    ['results file', ({ file }) => `[${path.basename(file)}](${path.relative(PAGE_DIR, file)})`],
    ['run', ({ figures }) => `${figures.startedAt.slice(0, 10)}, \`${figures.machine.revision}\`, ${Math.round(figures.runSeconds / 60)} min`],
    ['machine', ({ figures }) => machineLine(figures)],
    ['server', ({ figures }) => serverLine(figures)],
    ['sizes', ({ figures }) => overriddenSettings(figures.settings).join(' ') || "the issue's"],
  ];
  const figureCells = runs.map(({ figures }) => new Map(figureRows(figures).map((row) => [row.label, figureCell(row.slipway, row.peer)])));
  const barCells = runs.map(({ figures }) => new Map(bars(figures).map((bar) => [bar.asks, `${verdict(bar.met)}: ${bar.measured}`])));
  const metCount = runs.map(({ figures }) => {
    const all = bars(figures);
    return `${all.filter((bar) => bar.met).length} of ${all.length}`;
  });

  const rowsOf = (cells: Map<string, string>[], prefix = '') =>
    inOrder(cells.map((byLabel) => [...byLabel.keys()])).map((label) => [`${prefix}${label}`, ...cells.map((byLabel) => byLabel.get(label) ?? '')]);
  const rows = [
    ...about.map(([label, value]) => [label, ...runs.map(value)]),
    ...rowsOf(figureCells),
    ['bars met', ...metCount],
    ...rowsOf(barCells, 'bar: '),
  ];
  return markdownTable(
    ['figure', ...runs.map(({ figures }) => serverTitle(figures.server))],
    rows.map((row) => row.map(escapeCell)),
  );
}

/**
 * The README's table: each bar of the benchmark, with what the latest
 * published run on each kind of server measured, so a reader sees which
 * server a figure came from. The whole table is docs/benchmark.md's.
 */
export async function renderBenchmarkBars(): Promise<string> {
  const files = await resultsFiles();
  if (files.length === 0) return '_No run is published yet: see [the benchmark](docs/benchmark.md)._';
  const runs = await Promise.all(files.map(async (file) => readFigures(file)));
  const cells = runs.map((figures) => new Map(bars(figures).map((bar) => [bar.asks, `${bar.measured} (${verdict(bar.met)})`])));
  const rows = inOrder(cells.map((byBar) => [...byBar.keys()])).map((asks) => [asks, ...cells.map((byBar) => byBar.get(asks) ?? '')]);
  const run = (figures: Figures) => `${serverTitle(figures.server)}, ${figures.startedAt.slice(0, 10)}, \`${figures.machine.revision}\``;
  return markdownTable(
    ['bar', ...runs.map(run)],
    rows.map((row) => row.map(escapeCell)),
  );
}

/** Slipway's value (with its ratio to (a), and the rate an open loop settled at), then the tuned peer's. */
function figureCell(slipway: Cell | undefined, peer: Cell | undefined): string {
  const one = (cell: Cell) =>
    [cell.value, cell.ofBaseline && `${cell.ofBaseline} ×`, cell.settled && `settled ${cell.settled}`].filter(Boolean).join(', ');
  return [slipway && one(slipway), peer && `peer ${one(peer)}`].filter(Boolean).join('; ');
}

function machineLine({ machine, loadAverageAtEnd }: Figures): string {
  const memory = `${(machine.memoryBytes / 2 ** 30).toFixed(1)} GiB`;
  return `${machine.cores} cores, ${machine.cpuModel}, ${memory}; ${machine.platform}; Node ${machine.node}; load ${machine.loadAverage.toFixed(1)} → ${loadAverageAtEnd.toFixed(1)}`;
}

function serverLine({ server, machine }: Figures): string {
  const where = server.embedded ? 'embedded' : '`DATABASE_URL`';
  return `${server.version}, ${where}; an ordinary session: \`pg_jit_available()\` ${server.jitAvailable}, \`jit\` ${server.jit}; synchronous_commit ${machine.synchronousCommit}, fsync ${machine.fsync}`;
}

/** Every label of every run once, each run's order kept (a label only a later run has comes after its predecessor there). */
function inOrder(lists: string[][]): string[] {
  const all: string[] = [];
  for (const list of lists) {
    list.forEach((label, n) => {
      if (all.includes(label)) return;
      const before = n > 0 ? all.indexOf(list[n - 1]!) : -1;
      all.splice(before + 1, 0, label);
    });
  }
  return all;
}

/**
 * docs/benchmark.md's table of the time-driven work's lateness: a column per
 * committed run of bench/runTimeliness.ts (bench/results/timeliness/), a row
 * per kind of due time (p50 / p99 / max and how many), then the bars.
 */
export async function renderTimelinessFigures(): Promise<string> {
  const files = await resultsFiles(TIMELINESS_RESULTS_DIR);
  if (files.length === 0) return '_No run is published yet: `node --import tsx bench/runTimeliness.ts`, then `npm run bench:publish <its file>`._';
  const runs = await Promise.all(files.map(async (file) => ({ file, figures: await readTimelinessFigures(file) })));
  const late = (l: Lateness | undefined) => (l ? `${Math.round(l.p50Ms)} / ${Math.round(l.p99Ms)} / ${Math.round(l.maxMs)} ms (${l.count})` : '');
  const rows: string[][] = [
    ['results file', ...runs.map(({ file }) => `[${path.basename(file)}](${path.relative(PAGE_DIR, file)})`)],
    ['run', ...runs.map(({ figures }) => `${figures.startedAt.slice(0, 10)}, \`${figures.machine.revision}\`, ${Math.round(figures.runSeconds)} s`)],
    [
      'machine',
      ...runs.map(
        ({ figures }) =>
          `${figures.machine.cores} cores, ${figures.machine.cpuModel}; Node ${figures.machine.node}; load ${figures.machine.loadAverage.toFixed(1)}`,
      ),
    ],
    [
      'sizes',
      ...runs.map(
        ({ figures }) =>
          `${figures.settings.BENCH_WORKERS} workers; ${figures.settings.BENCH_TIMELY_LEASES} leases of each kind; ${figures.settings.BENCH_TIMELY_RESOURCES} resources for ${figures.settings.BENCH_TIMELY_SECONDS} s`,
      ),
    ],
    ['lease expiry, all in one second: p50 / p99 / max', ...runs.map(({ figures }) => late(figures.expiry))],
    ['heartbeat deadline, never beaten', ...runs.map(({ figures }) => late(figures.heartbeat))],
    ['wait deadline of 1 s, all in one second', ...runs.map(({ figures }) => late(figures.waitDeadline))],
    ['health check every 1 s', ...runs.map(({ figures }) => late(figures.checks))],
    ['resource gone → replacement active', ...runs.map(({ figures }) => late(figures.replacement))],
  ];
  const barCells = runs.map(({ figures }) => new Map(timelinessBars(figures).map((bar) => [bar.asks, `${verdict(bar.met)}: ${bar.measured}`])));
  for (const asks of inOrder(barCells.map((cells) => [...cells.keys()])))
    rows.push([`bar: ${asks}`, ...barCells.map((cells) => cells.get(asks) ?? '')]);
  return markdownTable(
    ['due time', ...runs.map(({ figures }) => serverTitle(figures.server))],
    rows.map((row) => row.map(escapeCell)),
  );
}

/**
 * docs/benchmark.md's start-up table, from bench/results/startup/figures.json
 * (`npm run bench:startup -- --publish`): each command line's p50, fastest
 * and 90th percentile, and the bar where it sets one.
 */
export async function renderStartupFigures(): Promise<string> {
  const figures = await readStartupFigures();
  if (figures === undefined) return '_No run is published yet: `npm run bench:startup -- --publish`, then `npm run docs`._';
  const s = (seconds: number) => `${seconds.toFixed(2)} s`;
  const rows = figures.rows.map((row) => [
    row.label,
    s(row.p50),
    s(row.min),
    s(row.p90),
    row.target === undefined ? '' : `p50 ≤ ${row.target} s: ${verdict(row.p50 <= row.target)}`,
  ]);
  const { machine } = figures;
  const run =
    `${figures.startedAt.slice(0, 10)}, \`${machine.revision}\`; ${machine.cores} cores, ${machine.cpuModel}; ${machine.platform}; Node ${machine.node}; ` +
    `load ${machine.loadAverage.toFixed(1)} → ${figures.loadAverageAtEnd.toFixed(1)}; ${figures.runs} calls of each`;
  const skipped = (figures.skipped ?? []).map((why) => `\n\nNot measured: ${why}.`).join('');
  return `${markdownTable(
    ['command', 'p50', 'fastest', 'p90', 'bar'],
    rows.map((row) => row.map(escapeCell)),
  )}\n\nRun: ${escapeCell(run)}.${skipped}`;
}
