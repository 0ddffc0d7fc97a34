import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Db } from '../../db/Database.ts';
import { listTeams } from '../../read/teams.ts';
import { dataTable } from '../dataTable.ts';
import { namedLink, when } from '../format.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';

/**
 * `/teams`: every team with its weight, what it holds and waits for, its
 * quotas and its latest changes (who made them). Teams are changed with
 * `slipway team` or the admin API (docs/scheduling.md), not here.
 */
export async function teamsPage(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/teams',
    config: { webAction: 'read' },
    handler: async (request, reply) => {
      const teams = await listTeams(db);
      const main = html`<h1>Teams</h1>
<p class="muted">A team's weight is its share of a contended blueprint against the other teams waiting or holding there; a quota keeps a team's
(or holder's) leases at or below its maximum, and requests over it wait. Changed with <code>slipway team</code> or the admin API.</p>
${dataTable(
  [
    { header: 'Team', cell: (t) => t.name },
    { header: 'Weight', cell: (t) => t.weight },
    { header: 'Tokens', cell: (t) => t.tokens },
    { header: 'Leases', cell: (t) => t.counted },
    { header: 'Waiting', cell: (t) => t.waiting },
    {
      header: 'Quotas',
      cell: (t) =>
        t.quotas.length === 0
          ? html`<span class="muted">none</span>`
          : t.quotas.map(
              (q) =>
                html`<div>${q.counted} of ${q.maxLeases} ${q.blueprintId === null ? 'overall' : html`at ${namedLink('blueprint', q.blueprintId, q.blueprintName!)}`}${
                  q.holder === null ? '' : html` for ${q.holder}`
                } <span class="muted">(set by ${q.createdBy})</span></div>`,
            ),
    },
    { header: 'Changed', cell: (t) => when(t.updated_at) },
  ],
  teams,
  (t) => `team-${t.name}`,
)}`;
      return sendPage(request, reply, { title: 'Teams', watch: ['*'], main });
    },
  });
}
