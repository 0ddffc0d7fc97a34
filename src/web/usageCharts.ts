import { LIFECYCLES, toneOf } from '../domain/lifecycle.ts';
import type { Usage } from '../read/usage.ts';
import { type ChartSeries, lineChart } from './charts.ts';
import { html, type SafeHtml } from './html.ts';
import { formatDuration } from '../domain/durations.ts';

const count = (v: number) => String(Math.round(v));
/** A chart's duration: whole milliseconds below a second, tenths to 10 s, whole seconds above. */
const duration = (ms: number) => formatDuration(ms < 1000 ? ms : Math.round(ms / (ms >= 10_000 ? 1000 : 100)) * (ms >= 10_000 ? 1000 : 100));
const rate = (v: number) => (v >= 10 ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, ''));

/**
 * The charts of the overview (`commands`: with the whole system's command
 * throughput) and of a blueprint's page: leases active and waiting,
 * resources by state, and how long leases waited to become active, over the
 * last hour of the collector's samples.
 */
export function usageCharts(usage: Usage, options: { commands: boolean }): SafeHtml {
  if (usage.samples.length === 0) {
    return html`<p class="muted">No samples in the last hour: each collector pass records one (<code>SLIPWAY_GC_INTERVAL_MINUTES</code>; <code>slipway gc run</code> runs a pass now).</p>`;
  }
  const { from, to, samples } = usage;
  const times = samples.map((s) => s.at);
  const chart = (id: string, title: string, format: (v: number) => string, series: ChartSeries[]) =>
    lineChart({ id, title, format, from, to, times, series });
  const resourceStates = Object.keys(LIFECYCLES.resource).filter((state) => samples.some((s) => (s.resources[state] ?? 0) > 0));
  return html`<div class="charts">
${chart('leases', 'Leases', count, [
  { name: 'active', tone: toneOf('lease', 'active'), values: samples.map((s) => s.leases.active ?? 0) },
  { name: 'waiting', tone: 'waiting', values: samples.map((s) => s.waiting) },
])}
${chart(
  'resources',
  'Resources by state',
  count,
  resourceStates.map((state) => ({ name: state, tone: toneOf('resource', state), values: samples.map((s) => s.resources[state] ?? 0) })),
)}
${chart('waits', 'Lease wait, created → active', duration, [
  { name: 'p50', tone: 'busy', values: samples.map((s) => s.waitP50Ms) },
  { name: 'p95', tone: 'waiting', values: samples.map((s) => s.waitP95Ms) },
])}
${
  options.commands
    ? chart('commands', 'Commands per minute', rate, [
        { name: 'appended', tone: 'good', values: samples.map((s) => s.commandsPerMinute) },
        { name: 'failed', tone: 'bad', values: samples.map((s) => s.failedPerMinute) },
      ])
    : ''
}
</div>`;
}
