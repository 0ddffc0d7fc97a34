import type { CommandStatus, ObjectKind } from '../../migrations/schema.ts';
import { LIFECYCLES, type StateTone, toneOf } from '../domain/lifecycle.ts';
import { html, type SafeHtml } from './html.ts';
import { formatTime } from '../domain/times.ts';
import { formatDuration } from '../domain/durations.ts';

/** How each command status reads, in the tones of the state table. */
const STATUS_TONES: Readonly<Record<CommandStatus, StateTone>> = {
  queued: 'waiting',
  running: 'busy',
  done: 'good',
  failed: 'bad',
  cancelled: 'quiet',
  coalesced: 'quiet',
};

/** A value as text in a badge: the text says it, the colour (by its tone) only repeats it. */
function badge(value: string, tone: StateTone): SafeHtml {
  return html`<span class="badge badge-${value} tone-${tone}">${value}</span>`;
}

/** An object's state in a badge, coloured by the state's tone in the state table. */
export function stateBadge(kind: ObjectKind, state: string): SafeHtml {
  return badge(state, toneOf(kind, state));
}

/** A command's status in a badge. */
export function statusBadge(status: CommandStatus): SafeHtml {
  return badge(status, STATUS_TONES[status]);
}

/**
 * An instant, in UTC to the second, with the exact value for machines and,
 * on hover, to the millisecond (events of one second, in order). The page's
 * script shows it relative to now ("3 min ago") and keeps it current
 * (assets/app.js); without the script it stays as written here.
 */
export function when(at: Date | null | undefined): SafeHtml {
  if (!at) return html`<span class="muted">—</span>`;
  const exact = formatTime(at);
  return html`<time datetime="${at.toISOString()}" title="${exact}">${exact.slice(0, 19)}Z</time>`;
}

/**
 * An object's attributes (what a holder needs: a directory, a host name),
 * one `key = value` line each, values as JSON; a dash for none.
 */
export function attributeList(attributes: unknown): SafeHtml {
  const entries = Object.entries((attributes as Record<string, unknown> | null) ?? {});
  if (entries.length === 0) return html`<span class="muted">—</span>`;
  return html`<ul class="attributes">${entries.map(([key, value]) => html`<li><code>${key}</code> = <code>${JSON.stringify(value)}</code></li>`)}</ul>`;
}

/** Labels as key=value chips, or a dash. */
export function labelList(labels: unknown): SafeHtml {
  const entries = Object.entries((labels as Record<string, string> | null) ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  if (entries.length === 0) return html`<span class="muted">—</span>`;
  return html`<ul class="attributes">${entries.map(([key, value]) => html`<li><code>${key}=${value}</code></li>`)}</ul>`;
}

/** How long from one instant to another, for people ("12ms", "1.2s", "3m4.5s"): to the millisecond below a second, else to a tenth. */
export function took(from: Date | null | undefined, to: Date | null | undefined): string {
  if (!from || !to) return '—';
  const ms = to.getTime() - from.getTime();
  return formatDuration(ms < 1000 ? ms : Math.round(ms / 100) * 100);
}

/** Where each kind of object is shown: each has a page of its own. */
const OBJECT_HREF: Record<ObjectKind, (id: number) => string> = {
  lease: (id) => `/leases/${id}`,
  resource: (id) => `/resources/${id}`,
  blueprint: (id) => `/blueprints/${id}`,
};

export function objectHref(kind: ObjectKind, id: number): string {
  return OBJECT_HREF[kind](id);
}

export function objectLink(kind: ObjectKind, id: number): SafeHtml {
  return html`<a href="${objectHref(kind, id)}">${kind} ${id}</a>`;
}

/** A link to an object's page that reads as its name (a blueprint's). */
export function namedLink(kind: ObjectKind, id: number, name: string): SafeHtml {
  return html`<a href="${objectHref(kind, id)}">${name}</a>`;
}

/** How many of a blueprint's leases or resources are in each state, each count a badge linking to that list. */
export function stateCounts(kind: 'lease' | 'resource', byState: Record<string, number>, href: (state: string) => string): SafeHtml {
  const shown = Object.keys(LIFECYCLES[kind]).filter((state) => (byState[state] ?? 0) > 0);
  if (shown.length === 0) return html`<span class="muted">none</span>`;
  return html`<span class="counts">${shown.map((state) => html`<a href="${href(state)}">${stateBadge(kind, state)} ${byState[state]}</a>`)}</span>`;
}

export function commandLink(id: number, kind?: string): SafeHtml {
  return html`<a href="/commands/${id}">command ${id}${kind ? ` (${kind})` : ''}</a>`;
}

/** An optional value, or a muted dash. */
export function orDash(value: string | number | null | undefined): SafeHtml {
  return value === null || value === undefined || value === '' ? html`<span class="muted">—</span>` : html`${value}`;
}

/** A lease's or resource's page heading: its state and, while commands are in flight, the state they lead to. */
export function stateHeading(title: string, kind: ObjectKind, state: string, goal: string | undefined): SafeHtml {
  return html`<h1>${title} ${stateBadge(kind, state)}${goal ? html` <span class="goal">→ ${stateBadge(kind, goal)}</span>` : ''}</h1>`;
}

/** The first rows of a lease's or resource's fields: its state and its target state. */
export function stateFields(state: string, goal: string | undefined): SafeHtml {
  return html`<dt>State</dt><dd>${state}</dd>
  <dt>Target state</dt><dd>${goal ?? html`<span class="muted">none (nothing in flight)</span>`}</dd>`;
}
