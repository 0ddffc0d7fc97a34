import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { IdParams } from '../../api/schemas.ts';
import type { Db } from '../../db/Database.ts';
import { resourceLabels } from '../../domain/labels.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { readResourceDetail } from '../../read/resources.ts';
import { targetState } from '../../read/targetState.ts';
import { cancelButton, commandButtons } from '../buttons.ts';
import { attributeList, labelList, namedLink, objectLink, orDash, stateFields, stateHeading, when } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { NoticeQuery, renderNotice } from '../notice.ts';
import { renderQueue, renderTimeline } from '../timeline.ts';
import { dataTable } from '../dataTable.ts';

/** `/resources/:id`: a resource's fields and slots, its release and reclaim buttons, its queue and its timeline. */
export async function resourcePage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/resources/:id',
    config: { webAction: 'read' },
    schema: { params: IdParams, querystring: z.object(NoticeQuery).strict() },
    handler: async (request, reply) => {
      const { params, query } = request;
      const resource = await readResourceDetail(db, params.id);
      const { queue, timeline } = await readHistory(db, { kind: 'resource', id: resource.id });
      const goal = targetState('resource', resource.state, queue);
      const main = html`${stateHeading(`Resource ${resource.id}`, 'resource', resource.state, goal)}
${await renderNotice(db, query)}
<section class="card">
<dl class="fields">
  ${stateFields(resource.state, goal)}
  <dt>Blueprint</dt><dd>${namedLink('blueprint', resource.blueprint_id, resource.blueprint_name)}</dd>
  <dt>Slots used</dt><dd>${resource.slots_taken} of ${resource.capacity}</dd>
  <dt>Idle since</dt><dd>${when(resource.idle_since)}</dd>
  <dt>Health</dt><dd>${resource.health === null ? html`<span class="muted">never checked</span>` : html`${resource.health}${resource.health_message ? ` (${resource.health_message})` : ''}, checked ${when(resource.checked_at)}`}</dd>
  <dt>Attributes</dt><dd>${attributeList(resource.attributes)}</dd>
  <dt>Labels</dt><dd>${labelList(resourceLabels(resource.labels, resource.blueprint_labels))}</dd>
  <dt>Message</dt><dd>${orDash(resource.message)}</dd>
  <dt>Created</dt><dd>${when(resource.created_at)}</dd>
  <dt>Updated</dt><dd>${when(resource.updated_at)}</dd>
</dl>
${commandButtons(request, { kind: 'resource', id: resource.id, state: resource.state, queue, leases: resource.slots.length })}
</section>
<h2>Slots</h2>
${
  resource.slots.length === 0
    ? html`<p class="muted">No lease holds a slot.</p>`
    : dataTable(
        [
          { header: 'Slot', cell: (s) => s.slot },
          { header: 'Lease', cell: (s) => objectLink('lease', s.lease_id) },
          { header: 'Holder', cell: (s) => s.holder },
          { header: 'Granted', cell: (s) => when(s.granted_at) },
        ],
        resource.slots,
      )
}
${resource.cleaning.length === 0 ? '' : html`<p>Waiting to be cleaned before another lease may have them: slot(s) ${resource.cleaning.join(', ')}.</p>`}
${renderQueue(queue, (c) => cancelButton(request, c))}
${await renderTimeline(db, 'resource', timeline)}`;
      const watch = [`resource:${resource.id}`, ...resource.slots.map((s) => `lease:${s.lease_id}`)];
      return sendPage(request, reply, { title: `Resource ${resource.id}`, watch, main });
    },
  });
}
