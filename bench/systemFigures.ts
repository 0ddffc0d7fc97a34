import { z } from 'zod';
import { measureActiveReleases } from './activeReleases.ts';
import { measureActivation, measureReleaseLatency, MilestoneLatencySchema } from './latency.ts';
import { LifecycleSchema, measureLifecycle } from './lifecycle.ts';
import type { LeaseSystem } from './LeaseSystem.ts';
import { ThroughputSchema } from './measure.ts';
import type { BenchSettings } from './settings.ts';

/** The figures measured the same way on Slipway and on the tuned peer, with their workers running. */
export const SystemFiguresSchema = z.object({
  /** (c) Leases from created to destroyed, with leases waiting for slots. */
  lifecycle: LifecycleSchema,
  /** (c) Settled releases of active leases, released at once. */
  activeReleases: ThroughputSchema,
  /** (e) Append → destroyed of releases of active leases, one entry per offered rate. */
  releaseLatency: z.array(MilestoneLatencySchema),
  /** (i) Created → active of leases on a pool with free slots. */
  activation: MilestoneLatencySchema,
});
export type SystemFigures = z.infer<typeof SystemFiguresSchema>;

/** Measures the system's figures, one after the other, each starting on a quiet system. */
export async function measureSystem(system: LeaseSystem, settings: BenchSettings, progress: (step: string) => void): Promise<SystemFigures> {
  const clients = settings.BENCH_CLIENTS;
  const seconds = settings.BENCH_LATENCY_SECONDS;
  const shape = { resources: settings.BENCH_LIFECYCLE_RESOURCES, slotsPerResource: settings.BENCH_LIFECYCLE_SLOTS };

  progress(`(c) ${system.name}: ${settings.BENCH_LIFECYCLE_LEASES} lifecycles on ${shape.resources} × ${shape.slotsPerResource} slots`);
  const lifecycle = await measureLifecycle(system, shape, settings.BENCH_LIFECYCLE_LEASES, clients);
  progress(`(c) ${system.name}: ${settings.BENCH_LIFECYCLE_LEASES} releases of active leases at once (after making them active)`);
  const activeReleases = await measureActiveReleases(system, settings.BENCH_LIFECYCLE_LEASES, clients);
  progress(`(i) ${system.name}: ${settings.BENCH_ACTIVATION_RATE} leases/s created on free slots for ${seconds} s`);
  const activation = await measureActivation(system, { rate: settings.BENCH_ACTIVATION_RATE, seconds });
  const releaseLatency = [];
  for (const rate of settings.BENCH_LATENCY_RATES) {
    progress(`(e) ${system.name}: ${rate} releases/s of active leases for ${seconds} s (after making them active)`);
    releaseLatency.push(await measureReleaseLatency(system, { rate, seconds }, clients));
  }
  return { lifecycle, activeReleases, releaseLatency, activation };
}
