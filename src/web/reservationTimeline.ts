import type { ReservationView } from '../read/reservations.ts';
import { formatTime } from '../domain/times.ts';
import { describeWhoMay } from '../domain/reservations.ts';
import { html, type SafeHtml } from './html.ts';

/** How far ahead the time line looks. */
export const TIMELINE_DAYS = 7;
const DAY_MS = 86_400_000;

/** In the SVG's own units, as the charts' (charts.ts). */
const WIDTH = 720;
const ROW = 22;
const PAD = { left: 4, top: 16 } as const;

/**
 * A blueprint's reservations on a time line over the coming days, as
 * inline SVG drawn on the server (as the charts are): a row per
 * reservation whose window is open or starts within TIMELINE_DAYS, its bar
 * from its window's start (or now) to its end (or the line's end), labelled
 * with its id, slots and who may use it; a tick at each day.
 */
export function reservationTimeline(reservations: readonly ReservationView[], now: Date): SafeHtml {
  const to = new Date(now.getTime() + TIMELINE_DAYS * DAY_MS);
  const shown = reservations.filter((r) => r.state !== 'cancelled' && r.ends_at > now && r.starts_at < to);
  if (shown.length === 0) return html`<p class="muted">No reservation in the next ${TIMELINE_DAYS} days.</p>`;
  const x = (t: Date) =>
    PAD.left +
    ((Math.min(Math.max(t.getTime(), now.getTime()), to.getTime()) - now.getTime()) / (to.getTime() - now.getTime())) * (WIDTH - 2 * PAD.left);
  const height = PAD.top + shown.length * ROW + 4;
  const days = Array.from({ length: TIMELINE_DAYS + 1 }, (_, n) => new Date(now.getTime() + n * DAY_MS));
  return html`<figure class="chart timeline" data-chart="reservations">
<figcaption>Reservations, the next ${TIMELINE_DAYS} days</figcaption>
<svg viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${shown.map((r) => `reservation ${r.id}: ${r.slots} slot(s) from ${formatTime(r.starts_at)} to ${formatTime(r.ends_at)}`).join('; ')}">
  ${days.map(
    (d, n) => html`<line class="grid" x1="${x(d)}" y1="${PAD.top - 4}" x2="${x(d)}" y2="${height}"></line>
  <text class="tick" x="${x(d)}" y="${PAD.top - 6}" text-anchor="${n === days.length - 1 ? 'end' : 'start'}">${n === 0 ? 'now' : `+${n}d`}</text>`,
  )}
  ${shown.map((r, n) => {
    const y = PAD.top + n * ROW;
    const from = x(r.starts_at);
    return html`<g class="tone-${r.state === 'active' ? 'good' : 'waiting'}" data-reservation="${r.id}">
    <rect x="${from}" y="${y + 2}" width="${Math.max(2, x(r.ends_at) - from)}" height="${ROW - 6}" rx="3"></rect>
    <text class="tick" x="${from + 4}" y="${y + ROW - 8}">${r.id}: ${r.slots} slot(s), ${describeWhoMay(r.team, r.holders)}</text>
  </g>`;
  })}
</svg>
</figure>`;
}
