import type { StateTone } from '../domain/lifecycle.ts';
import { html, type SafeHtml } from './html.ts';

/** One line of a chart: a value per sample (null: no value then, and the line breaks). */
export interface ChartSeries {
  readonly name: string;
  readonly tone: StateTone;
  readonly values: ReadonlyArray<number | null>;
}

export interface LineChart {
  /** What the chart is called in the page, and its `data-chart` name for tests. */
  readonly id: string;
  readonly title: string;
  /** How values are written on the axis and in the legend. */
  readonly format: (value: number) => string;
  readonly from: Date;
  readonly to: Date;
  /** When each value was sampled. */
  readonly times: readonly Date[];
  readonly series: readonly ChartSeries[];
}

/** In the SVG's own units, about the pixels of a chart in a card of the grid, so its text reads at the page's small size. */
const WIDTH = 360;
const HEIGHT = 130;
const PAD = { left: 46, right: 6, top: 8, bottom: 18 } as const;

/**
 * A line chart as inline SVG, drawn on the server from a few dozen samples:
 * no script, no library, nothing loaded from elsewhere. Time runs along the
 * window (a gap in the samples shows as a gap in time); the value axis
 * starts at zero and ends at a round number above the largest value. Each
 * line carries its values (`data-values`), and the legend the latest one.
 */
export function lineChart(chart: LineChart): SafeHtml {
  const all = chart.series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const top = roundedUp(Math.max(0, ...all));
  const span = chart.to.getTime() - chart.from.getTime();
  const x = (t: Date) => PAD.left + ((t.getTime() - chart.from.getTime()) / span) * (WIDTH - PAD.left - PAD.right);
  const y = (v: number) => HEIGHT - PAD.bottom - (top === 0 ? 0 : (v / top) * (HEIGHT - PAD.top - PAD.bottom));
  const latest = (s: ChartSeries) => [...s.values].reverse().find((v) => v !== null);
  const label = `${chart.title}: ${chart.series.map((s) => `${s.name} ${describe(latest(s), chart.format)}`).join(', ')}`;
  return html`<figure class="chart" data-chart="${chart.id}">
<figcaption>${chart.title}</figcaption>
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${label}">
  <line class="axis" x1="${PAD.left}" y1="${y(0)}" x2="${WIDTH - PAD.right}" y2="${y(0)}"></line>
  <line class="grid" x1="${PAD.left}" y1="${y(top)}" x2="${WIDTH - PAD.right}" y2="${y(top)}"></line>
  <text class="tick" x="${PAD.left - 4}" y="${y(top) + 4}" text-anchor="end">${chart.format(top)}</text>
  <text class="tick" x="${PAD.left - 4}" y="${y(0) + 4}" text-anchor="end">${chart.format(0)}</text>
  <text class="tick" x="${PAD.left}" y="${HEIGHT - 4}">${minutesAgo(chart.from, chart.to)}</text>
  <text class="tick" x="${WIDTH - PAD.right}" y="${HEIGHT - 4}" text-anchor="end">now</text>
  ${chart.series.map(
    (
      s,
    ) => html`<g class="series tone-${s.tone}" data-series="${s.name}" data-values="${s.values.map((v) => (v === null ? '' : String(round(v)))).join(',')}">
    ${segments(s.values, chart.times).map((points) =>
      points.length === 1
        ? html`<circle cx="${x(points[0]!.t)}" cy="${y(points[0]!.v)}" r="3"></circle>`
        : html`<polyline points="${points.map((p) => `${round(x(p.t))},${round(y(p.v))}`).join(' ')}"></polyline>`,
    )}
  </g>`,
  )}
</svg>
<ul class="legend">${chart.series.map((s) => html`<li class="tone-${s.tone}">${s.name} <b>${describe(latest(s), chart.format)}</b></li>`)}</ul>
</figure>`;
}

/** The runs of consecutive values, split where a value is missing. */
function segments(values: ReadonlyArray<number | null>, times: readonly Date[]): Array<Array<{ t: Date; v: number }>> {
  const runs: Array<Array<{ t: Date; v: number }>> = [];
  let current: Array<{ t: Date; v: number }> = [];
  values.forEach((v, i) => {
    if (v === null) {
      if (current.length > 0) runs.push(current);
      current = [];
    } else current.push({ t: times[i]!, v });
  });
  if (current.length > 0) runs.push(current);
  return runs;
}

/** The smallest of 1, 2 or 5 times a power of ten at or above `value` (0 stays 0). */
function roundedUp(value: number): number {
  if (value <= 0) return 0;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= value)!;
}

const round = (v: number) => Math.round(v * 10) / 10;
const describe = (value: number | undefined, format: (v: number) => string) => (value === undefined ? 'no data' : format(value));
const minutesAgo = (from: Date, to: Date) => `${Math.round((to.getTime() - from.getTime()) / 60_000)} min ago`;
