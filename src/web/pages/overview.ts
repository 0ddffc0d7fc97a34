import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Db } from '../../db/Database.ts';
import { readOverview } from '../../read/overview.ts';
import { readUsage } from '../../read/usage.ts';
import { commandLink, namedLink, objectLink, stateBadge, stateCounts, statusBadge, took } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { usageCharts } from '../usageCharts.ts';
import { dataTable } from '../dataTable.ts';

/** `/`: every blueprint with its resources and leases by state and its waiting leases, the last hour's use in charts, and the commands in flight. */
export async function overviewPage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/',
    config: { webAction: 'read' },
    handler: async (request, reply) => {
      const overview = await readOverview(db);
      const usage = await readUsage(db);
      const now = new Date();
      const main = html`<h1>Overview</h1>
<h2>Blueprints</h2>
${overview.blueprints.length === 0 ? html`<p class="muted">No blueprints yet (<code>slipway blueprint create</code>).</p>` : ''}
<div class="cards">
${overview.blueprints.map(
  (b) => html`<section class="card" aria-label="blueprint ${b.name}">
  <h3>${namedLink('blueprint', b.id, b.name)} ${stateBadge('blueprint', b.state)}</h3>
  <dl class="fields">
    <dt>Driver</dt><dd>${b.driver}</dd>
    <dt>Resources</dt><dd>${stateCounts('resource', b.resourcesByState, (s) => `/resources?blueprint=${b.id}&state=${s}`)}
      <span class="muted">(${b.live_resources} of at most ${b.max_resources} live)</span></dd>
    <dt>Leases</dt><dd>${stateCounts('lease', b.leasesByState, (s) => `/leases?blueprint=${b.id}&state=${s}`)}</dd>
    <dt>Waiting leases</dt><dd>${b.waitingLeases}</dd>
  </dl>
</section>`,
)}
</div>
<h2>The last hour</h2>
${usageCharts(usage, { commands: true })}
<h2>Commands in flight</h2>
<p><a href="/commands?status=queued">${statusBadge('queued')} ${overview.inFlight.queued}</a>
   <a href="/commands?status=running">${statusBadge('running')} ${overview.inFlight.running}</a></p>
${
  overview.oldestInFlight.length === 0
    ? html`<p class="muted">Nothing queued or running.</p>`
    : dataTable(
        [
          { header: 'Command', cell: (c) => commandLink(c.id, c.kind) },
          { header: 'Target', cell: (c) => objectLink(c.target_kind, c.target_id) },
          { header: 'Status', cell: (c) => statusBadge(c.status) },
          { header: 'Waiting for', cell: (c) => took(c.created_at, now) },
          { header: 'Issued by', cell: (c) => html`${c.issued_by} <span class="muted">(${c.source})</span>` },
        ],
        overview.oldestInFlight,
      )
}`;
      return sendPage(request, reply, { title: 'Overview', watch: ['*'], main });
    },
  });
}
