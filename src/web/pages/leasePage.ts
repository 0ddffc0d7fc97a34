import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { IdParams } from '../../api/schemas.ts';
import type { Db } from '../../db/Database.ts';
import { readLineStanding } from '../../read/lineStanding.ts';
import { describeEstimate } from '../../read/standingText.ts';
import { findLease } from '../../read/leases.ts';
import { readHistory } from '../../read/objectHistory.ts';
import { targetState } from '../../read/targetState.ts';
import { cancelButton, commandButtons } from '../buttons.ts';
import { attributeList, namedLink, objectLink, orDash, stateFields, stateHeading, when } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { NoticeQuery, renderNotice } from '../notice.ts';
import { accepts, holdsSlot, isSettingUp } from '../../domain/lifecycle.ts';
import { endingOf } from '../../domain/ending.ts';
import { renderQueue, renderTimeline } from '../timeline.ts';
import { explainLease } from '../../drain/explainLease.ts';
import type { Explanation } from '../../domain/explanation.ts';

/** `/leases/:id`: a lease's fields, its release button, its queue and its timeline. */
export async function leasePage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/leases/:id',
    config: { webAction: 'read' },
    schema: { params: IdParams, querystring: z.object(NoticeQuery).strict() },
    handler: async (request, reply) => {
      const { params, query } = request;
      const lease = await findLease(db, params.id);
      const { queue, timeline } = await readHistory(db, { kind: 'lease', id: lease.id });
      const goal = targetState('lease', lease.state, queue);
      const line = await readLineStanding(db, lease.id);
      const ending = endingOf(lease.ending);
      // Only a waiting lease has something to explain; its blueprint's decision is run (and rolled back) for it.
      const explanation = line ? await explainLease(db, lease.id) : undefined;
      const main = html`${stateHeading(`Lease ${lease.id}`, 'lease', lease.state, goal)}
${await renderNotice(db, query)}
<section class="card">
<dl class="fields">
  ${stateFields(lease.state, goal)}
  ${
    line
      ? html`<dt>Waiting</dt><dd>for a free slot at ${lease.blueprint_name}: ${line.position === 1 ? 'next in line' : `${line.position - 1} ahead`}, since ${when(line.since)}; ${line.unservable !== null ? html`<strong>it cannot be served</strong>: ${line.unservable}` : html`${describeEstimate(line.estimateSeconds)} <span class="muted">(${line.basis})</span>`}${line.reason ? html`<br>${line.reason}` : ''}</dd>`
      : ''
  }
  ${
    // A wait deadline matters only until the lease is active.
    isSettingUp('lease', lease.state) && lease.wait_deadline
      ? html`<dt>Wait deadline</dt><dd>${when(lease.wait_deadline)} <span class="muted">not active by then, it is released</span></dd>`
      : ''
  }
  ${
    // Told to its holder: Slipway ends the lease by then, whatever the holder does.
    ending && holdsSlot('lease', lease.state)
      ? html`<dt>Ending</dt><dd><strong>by ${when(new Date(ending.at))}</strong>: ${ending.reason} <span class="muted">(${ending.kind}; stop the work and release it)</span></dd>`
      : ''
  }
  <dt>Priority</dt><dd>${lease.priority}</dd>
  <dt>Selector</dt><dd>${lease.selector === null ? orDash(null) : html`<code>${lease.selector}</code>`}</dd>
  <dt>Team</dt><dd><a href="/teams#team-${lease.team}">${lease.team}</a></dd>
  <dt>Holder</dt><dd>${lease.holder}</dd>
  <dt>Blueprint</dt><dd>${namedLink('blueprint', lease.blueprint_id, lease.blueprint_name)}</dd>
  <dt>Resource</dt><dd>${lease.resource_id === null ? orDash(null) : html`${objectLink('resource', lease.resource_id)} <span class="muted">slot ${lease.slot}</span>`}</dd>
  ${
    // Deadlines matter only while a renewal could move them: a released or destroyed lease has none left.
    accepts('lease', lease.state, 'renew')
      ? html`<dt>Expires</dt><dd>${when(lease.expires_at)}</dd>
  <dt>Heartbeat due</dt><dd>${when(lease.heartbeat_deadline)}</dd>
  ${lease.end_by ? html`<dt>Ends by</dt><dd>${when(lease.end_by)} <span class="muted">at the latest: ${ending && Date.parse(ending.at) === lease.end_by.getTime() ? ending.reason : html`its blueprint's longest hold, from its grant ${when(lease.granted_at)}`}</span></dd>` : ''}`
      : ''
  }
  <dt>Attributes</dt><dd>${attributeList(lease.attributes)}</dd>
  <dt>Message</dt><dd>${orDash(lease.message)}</dd>
  <dt>Created</dt><dd>${when(lease.created_at)}</dd>
  <dt>Updated</dt><dd>${when(lease.updated_at)}</dd>
</dl>
${commandButtons(request, { kind: 'lease', id: lease.id, state: lease.state, queue, owner: lease.holder })}
</section>
${explanation ? renderExplanation(explanation) : ''}
${renderQueue(queue, (c) => cancelButton(request, c))}
${await renderTimeline(db, 'lease', timeline)}`;
      const watch = [`lease:${lease.id}`, ...(lease.resource_id === null ? [] : [`resource:${lease.resource_id}`])];
      return sendPage(request, reply, { title: `Lease ${lease.id}`, watch, main });
    },
  });
}

/** Why the lease waits, at each blueprint that could serve it, and what would grant it now (`slipway lease explain`). */
function renderExplanation(explanation: Explanation) {
  return html`<h2>Why it waits</h2>
<section class="card" id="explanation">
<p>${explanation.summary}</p>
${explanation.blueprints.map(
  (at) => html`<h3>At ${at.blueprint}: ${at.grantedNow ? 'granted now' : 'not granted now'}</h3>
<ul>
${at.reasons.map((r) => html`<li><strong>${r.kind}</strong>: ${r.says}${r.change === null ? '' : html`<br><span class="muted">→ ${r.change}</span>`}</li>`)}
</ul>`,
)}
</section>`;
}
