import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** The committed start-up figures (`npm run bench:startup -- --publish`), which docs/benchmark.md's start-up table is rendered from. */
export const STARTUP_FIGURES_FILE = fileURLToPath(new URL('./results/startup/figures.json', import.meta.url));

const StartupRowSchema = z.object({
  label: z.string(),
  /** Seconds from spawning the command to its exit: the median of the run's calls, the fastest, and the 90th percentile. */
  p50: z.number(),
  min: z.number(),
  p90: z.number(),
  /** The bar for the p50, in seconds, where it sets one. */
  target: z.number().optional(),
});
export type StartupRow = z.infer<typeof StartupRowSchema>;

export const StartupFiguresSchema = z.object({
  startedAt: z.string(),
  machine: z.object({
    cores: z.number(),
    cpuModel: z.string(),
    platform: z.string(),
    node: z.string(),
    revision: z.string(),
    /** 1-minute load average when the run began: well above 0 means something else competed for the cores. */
    loadAverage: z.number(),
  }),
  loadAverageAtEnd: z.number(),
  /** Timed calls of each command. */
  runs: z.number(),
  rows: z.array(StartupRowSchema),
  /** Rows the run could not measure, and why. */
  skipped: z.array(z.string()).optional(),
});
export type StartupFigures = z.infer<typeof StartupFiguresSchema>;

/** The committed figures, or undefined when none are. */
export async function readStartupFigures(file = STARTUP_FIGURES_FILE): Promise<StartupFigures | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  return text === undefined ? undefined : StartupFiguresSchema.parse(JSON.parse(text));
}
