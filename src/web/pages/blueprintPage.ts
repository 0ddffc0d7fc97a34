import { describePreemption, preemptionOf } from '../../domain/preemption.ts';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { IdParams } from '../../api/schemas.ts';
import type { Db } from '../../db/Database.ts';
import { readBlueprintDetail, readWaitingLine } from '../../read/blueprints.ts';
import { describePriorityStep } from '../../domain/priority.ts';
import { describeLongestHold } from '../../domain/ending.ts';
import { describeHalfLife } from '../../domain/fairShare.ts';
import { parseSelector } from '../../domain/labels.ts';
import { estimateFor, readTurnover } from '../../read/lineStanding.ts';
import { describeEstimate } from '../../read/standingText.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { listResources } from '../../read/resources.ts';
import { readUsage } from '../../read/usage.ts';
import { readOrphans } from '../../read/orphans.ts';
import { ORPHANS_SETTINGS } from '../../domain/orphans.ts';
import { LIVE } from '../../read/stateFilter.ts';
import { cancelButton, commandButtons } from '../buttons.ts';
import { attributeList, labelList, objectLink, orDash, stateBadge, stateCounts, when } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { NoticeQuery, renderNotice } from '../notice.ts';
import { renderQueue, renderTimeline } from '../timeline.ts';
import { usageCharts } from '../usageCharts.ts';
import { formatDuration } from '../../domain/durations.ts';
import { describeSlotsPerResource } from '../../domain/slotsPerResource.ts';
import { dataTable } from '../dataTable.ts';
import { listReservations } from '../../read/reservations.ts';
import { reservationTimeline } from '../reservationTimeline.ts';
import { describeWhoMay } from '../../domain/reservations.ts';

/** How many waiting leases and live resources the page lists; the rest are a link away. */
const SHOWN = 20;

/** `/blueprints/:id`: a blueprint's settings and limits, its usage now and over the last hour, its waiting line, its live resources, its queue and its timeline. */
export async function blueprintPage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/blueprints/:id',
    config: { webAction: 'read' },
    schema: { params: IdParams, querystring: z.object(NoticeQuery).strict() },
    handler: async (request, reply) => {
      const { params, query } = request;
      const blueprint = await readBlueprintDetail(db, params.id);
      const { queue, timeline } = await readHistory(db, { kind: 'blueprint', id: blueprint.id });
      const line = await readWaitingLine(db, blueprint.id, SHOWN);
      const turnover = await readTurnover(db, blueprint);
      const estimate = (w: (typeof line)[number]) =>
        estimateFor(turnover, { team: w.team, teamAhead: w.team_ahead, selector: w.selector === null ? undefined : parseSelector(w.selector) });
      const usage = await readUsage(db, blueprint.id);
      const resources = await listResources(db, { state: LIVE, blueprintId: blueprint.id }, { limit: SHOWN, order: 'newest' });
      const orphans = await readOrphans(db, blueprint.id);
      const reservations = (await listReservations(db, { blueprintId: blueprint.id })).filter((r) => r.state === 'active' || r.state === 'upcoming');
      const idle =
        blueprint.idle_timeout_ms === null
          ? 'an idle resource is kept'
          : `an idle resource beyond the minimum is reclaimed after ${formatDuration(blueprint.idle_timeout_ms)}`;
      const main = html`<h1>Blueprint ${blueprint.name} ${stateBadge('blueprint', blueprint.state)}</h1>
${await renderNotice(db, query)}
<section class="card">
<dl class="fields">
  <dt>Id</dt><dd>${blueprint.id}</dd>
  <dt>Driver</dt><dd>${blueprint.driver}</dd>
  <dt>Settings</dt><dd>${attributeList(blueprint.settings)}</dd>
  <dt>Limits</dt><dd>${blueprint.min_resources}–${blueprint.max_resources} resources, ${describeSlotsPerResource(blueprint.leases_per_resource, blueprint.slotsPerResource)} lease(s) each; ${idle}</dd>
  <dt>Checks</dt><dd>${blueprint.check_interval_ms === null ? 'none: resources are trusted as made' : `each resource every ${formatDuration(blueprint.check_interval_ms)}`}</dd>
  <dt>Priorities</dt><dd>${describePriorityStep(blueprint.priority_step_ms)}</dd>
  <dt>Longest hold</dt><dd>${describeLongestHold(blueprint.max_hold_ms)}</dd>
  <dt>Preemption</dt><dd>${describePreemption(preemptionOf(blueprint.preemption))}</dd>
  <dt>Fair share</dt><dd>${describeHalfLife(blueprint.fair_share_half_life_ms)}</dd>
  <dt>Labels</dt><dd>${labelList(blueprint.labels)}</dd>
  <dt>Orphans</dt><dd>${blueprint.orphans}: ${ORPHANS_SETTINGS[blueprint.orphans]}</dd>
  <dt>Cleaning</dt><dd>${blueprint.clean_between_leases ? `each slot between leases; a resource is quarantined after ${blueprint.clean_attempts} failed cleaning(s) in a row` : 'none'}</dd>
  <dt>Resources</dt><dd>${stateCounts('resource', blueprint.resourcesByState, (s) => `/resources?blueprint=${blueprint.id}&state=${s}`)}
    <span class="muted">(${blueprint.live_resources} of at most ${blueprint.max_resources} live)</span></dd>
  <dt>Leases</dt><dd>${stateCounts('lease', blueprint.leasesByState, (s) => `/leases?blueprint=${blueprint.id}&state=${s}`)}</dd>
  <dt>Waiting leases</dt><dd>${blueprint.waitingLeases}</dd>
  <dt>Created</dt><dd>${when(blueprint.created_at)}</dd>
  <dt>Updated</dt><dd>${when(blueprint.updated_at)}</dd>
</dl>
${commandButtons(request, { kind: 'blueprint', id: blueprint.id, state: blueprint.state, queue })}
</section>
<h2>The last hour</h2>
${usageCharts(usage, { commands: false })}
<h2>Waiting line</h2>
${
  line.length === 0
    ? html`<p class="muted">No lease waits for capacity.</p>`
    : html`${dataTable(
        [
          { header: 'Place', cell: (w) => w.ahead + 1 },
          { header: 'Lease', cell: (w) => objectLink('lease', w.lease_id) },
          { header: 'Holder', cell: (w) => w.holder },
          { header: 'Priority', cell: (w) => w.priority },
          { header: 'Waiting since', cell: (w) => when(w.since) },
          { header: 'Team', cell: (w) => w.team },
          { header: 'Active in', cell: (w) => describeEstimate(estimate(w).seconds) },
        ],
        line,
      )}
${blueprint.waitingLeases > line.length ? html`<p class="muted">and ${blueprint.waitingLeases - line.length} more.</p>` : ''}
<p class="muted">Estimates by the slots each may have as they come free, its team's part of them, and its team's leases ahead of it; for the 1st: ${estimate(line[0]!).basis}.</p>`
}
<h2>Reservations</h2>
${reservationTimeline(reservations, new Date())}
${
  reservations.length === 0
    ? ''
    : dataTable(
        [
          { header: 'Reservation', cell: (r) => String(r.id) },
          { header: 'Slots', cell: (r) => String(r.slots) },
          { header: 'From', cell: (r) => when(r.starts_at) },
          { header: 'To', cell: (r) => when(r.ends_at) },
          { header: 'State', cell: (r) => r.state },
          { header: 'For', cell: (r) => describeWhoMay(r.team, r.holders) },
          { header: 'Leases', cell: (r) => `${r.holding} holding, ${r.waiting} waiting` },
          { header: 'Made by', cell: (r) => `${r.created_by} (${r.created_source})${r.reason ? `: ${r.reason}` : ''}` },
        ],
        reservations,
        (r) => `reservation-${r.id}`,
      )
}
<h2>Live resources</h2>
${
  resources.items.length === 0
    ? html`<p class="muted">None.</p>`
    : html`${dataTable(
        [
          { header: 'Resource', cell: (r) => objectLink('resource', r.id) },
          { header: 'State', cell: (r) => stateBadge('resource', r.state) },
          { header: 'Slots used', cell: (r) => `${r.slots_taken} of ${r.capacity}` },
          { header: 'Idle since', cell: (r) => when(r.idle_since) },
          { header: 'Message', cell: (r) => orDash(r.message) },
        ],
        resources.items,
      )}
${resources.next === null ? '' : html`<p><a href="/resources?blueprint=${blueprint.id}">All of its resources</a></p>`}`
}
<h2>Orphans</h2>
${
  orphans.length === 0
    ? html`<p class="muted">None: its driver lists nothing that no resource, or no lease, stands for (or cannot list).</p>`
    : dataTable(
        [
          { header: 'Orphan', cell: (o) => o.external_id },
          { header: 'Made for', cell: (o) => (o.resource_id === null ? '—' : objectLink('resource', Number(o.resource_id))) },
          { header: 'Slot', cell: (o) => (o.slot === null ? '—' : String(o.slot)) },
          { header: 'Attributes', cell: (o) => attributeList(o.attributes) },
          { header: 'Unmatched since', cell: (o) => html`${when(o.first_seen_at)} (${o.passes} pass(es))` },
        ],
        orphans,
      )
}
${renderQueue(queue, (c) => cancelButton(request, c))}
${await renderTimeline(db, 'blueprint', timeline)}`;
      // Its leases and resources change it without a command of its own: refreshed as lists are.
      return sendPage(request, reply, { title: `Blueprint ${blueprint.name}`, watch: [`blueprint:${blueprint.id}`, '*'], main });
    },
  });
}
