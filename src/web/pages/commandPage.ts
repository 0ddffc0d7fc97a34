import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { IdParams } from '../../api/schemas.ts';
import type { Db } from '../../db/Database.ts';
import { readCommandTree } from '../../read/commandTree.ts';
import { findCommand } from '../../read/commands.ts';
import { cancelButton } from '../buttons.ts';
import { commandLink, objectLink, orDash, statusBadge, took, when } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { NoticeQuery, renderNotice } from '../notice.ts';
import { dataTable } from '../dataTable.ts';

/** `/commands/:id`: a command's status and outcome, who asked and why, and the tree of commands it caused. */
export async function commandPage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/commands/:id',
    config: { webAction: 'read' },
    schema: { params: IdParams, querystring: z.object(NoticeQuery).strict() },
    handler: async (request, reply) => {
      const { params, query } = request;
      const command = await findCommand(db, params.id);
      const tree = await readCommandTree(db, command.id);
      const main = html`<h1>Command ${command.id}: ${command.kind} ${statusBadge(command.status)}</h1>
${await renderNotice(db, query)}
<section class="card">
<dl class="fields">
  <dt>Target</dt><dd>${objectLink(command.target_kind, command.target_id)}</dd>
  <dt>Status</dt><dd>${command.status}</dd>
  <dt>Outcome</dt><dd>${orDash(command.message)}</dd>
  <dt>Issued by</dt><dd>${command.issued_by} <span class="muted">(from ${command.source})</span></dd>
  <dt>Reason</dt><dd>${orDash(command.reason)}</dd>
  <dt>Caused by</dt><dd>${command.caused_by === null ? orDash(null) : commandLink(command.caused_by)}</dd>
  ${command.coalesced_into !== null ? html`<dt>Joined</dt><dd>${commandLink(command.coalesced_into)} <span class="muted">(already in flight)</span></dd>` : ''}
  <dt>Request</dt><dd>${orDash(command.request_id)}${command.client_address ? html` <span class="muted">from ${command.client_address}</span>` : ''}</dd>
  <dt>Queued</dt><dd>${when(command.created_at)}</dd>
  <dt>Started</dt><dd>${when(command.started_at)}</dd>
  <dt>Finished</dt><dd>${when(command.finished_at)} <span class="muted">${command.finished_at ? `(${took(command.created_at, command.finished_at)} after queued)` : ''}</span></dd>
  <dt>Attempts</dt><dd>${command.attempts}</dd>
</dl>
${cancelButton(request, command)}
</section>
<h2>What it caused</h2>
${
  tree.length <= 1
    ? html`<p class="muted">Nothing (yet).</p>`
    : dataTable(
        [
          {
            header: 'Command',
            className: 'tree-node',
            cell: (node) =>
              html`<span aria-hidden="true">${'\u00a0\u00a0'.repeat(node.depth)}${node.depth > 0 ? '└ ' : ''}</span>${commandLink(node.id, node.kind)}`,
          },
          { header: 'Target', cell: (node) => objectLink(node.target_kind, node.target_id) },
          { header: 'Status', cell: (node) => statusBadge(node.status) },
          { header: 'Queued', cell: (node) => when(node.created_at) },
          { header: 'Took', cell: (node) => took(node.started_at ?? node.created_at, node.finished_at) },
          { header: 'Outcome', cell: (node) => orDash(node.message) },
        ],
        tree,
      )
}`;
      const watch = tree.map((node) => `command:${node.id}`);
      return sendPage(request, reply, { title: `Command ${command.id}`, watch: watch.length > 0 ? watch : [`command:${command.id}`], main });
    },
  });
}
