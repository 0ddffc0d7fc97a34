import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ApiWaitSchema } from './apiBench.ts';
import { BaselineSchema } from './baseline.ts';
import { DrainSchema } from './drain.ts';
import { MachineSchema } from './machine.ts';
import { ThroughputSchema } from './measure.ts';
import { PeerRunSchema } from './peer/measurePeer.ts';
import { ExplanationFiguresSchema } from './explanations.ts';
import { PreemptionFiguresSchema } from './preemption.ts';
import { ServerSchema } from './server.ts';
import { ServiceFiguresSchema } from './serviceBench.ts';
import { SettingsSchema } from './settings.ts';
import { SystemFiguresSchema } from './systemFigures.ts';

/** Every figure of one run, with what they depend on: what a run writes, and what the report prints. */
export const FiguresSchema = z.object({
  startedAt: z.string(),
  machine: MachineSchema,
  server: ServerSchema,
  settings: SettingsSchema,
  /** The command line that repeats the run. */
  reproduce: z.string(),
  baseline: BaselineSchema,
  append: ThroughputSchema,
  cheapPath: DrainSchema,
  slipway: SystemFiguresSchema.extend({
    /** Commands that ended `failed` while the workers ran. */
    failedCommands: z.number(),
    /** (f) Each worker process's peak RSS while the workers ran, in bytes. */
    peakRssBytes: z.array(z.number()),
  }),
  api: z.object({ releases: ThroughputSchema, wait: ApiWaitSchema }),
  /** (j) The service as `slipway start` runs it. */
  service: ServiceFiguresSchema,
  /** (k) Urgent leases granted by preemption; absent from runs before it was measured. */
  preemption: PreemptionFiguresSchema.optional(),
  /** (l) Explanations of waiting leases; absent from runs before it was measured. */
  explanations: ExplanationFiguresSchema.optional(),
  peer: z.object({
    tuned: PeerRunSchema.extend(SystemFiguresSchema.shape),
    /** Absent when BENCH_PEER_DEFAULTS_LEASES is 0. */
    defaults: PeerRunSchema.extend({ activeReleases: ThroughputSchema }).optional(),
  }),
  /** 1-minute load average when the run ended. */
  loadAverageAtEnd: z.number(),
  /** Wall time of the whole run, setup included. */
  runSeconds: z.number(),
});
export type Figures = z.infer<typeof FiguresSchema>;

/** Where runs keep their figures: under .slipway/, which git ignores. */
const FIGURES_DIR = path.resolve('.slipway', 'bench');
const PREFIX = 'figures-';

/** Writes the run's figures to .slipway/bench/figures-<start time>.json; returns the path. */
export async function writeFigures(figures: Figures): Promise<string> {
  await mkdir(FIGURES_DIR, { recursive: true });
  // The ISO time without colons, which some file systems and tools refuse.
  const file = path.join(FIGURES_DIR, `${PREFIX}${figures.startedAt.replaceAll(':', '-')}.json`);
  await writeFile(file, `${JSON.stringify(figures, null, 2)}\n`);
  return file;
}

/** Reads a figures file back, checked against the schema (it may come from an older run, or by hand). */
export async function readFigures(file: string): Promise<Figures> {
  const parsed = FiguresSchema.safeParse(JSON.parse(await readFile(file, 'utf8')));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`${file} is not a figures file of this benchmark: ${problems}`);
  }
  return parsed.data;
}

/** The newest figures file, if any run wrote one (their names sort by start time). */
export async function latestFiguresFile(): Promise<string | undefined> {
  const names = await readdir(FIGURES_DIR).catch(() => []);
  const latest = names
    .filter((name) => name.startsWith(PREFIX) && name.endsWith('.json'))
    .sort()
    .at(-1);
  return latest && path.join(FIGURES_DIR, latest);
}
