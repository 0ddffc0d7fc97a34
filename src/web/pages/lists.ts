import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { CommandRow } from '../../../migrations/schema.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { BlueprintRef, TargetRef } from '../../api/schemas.ts';
import type { Db } from '../../db/Database.ts';
import { accepts, LIFECYCLES } from '../../domain/lifecycle.ts';
import { describeSlotsPerResource } from '../../domain/slotsPerResource.ts';
import { formatDuration } from '../../domain/durations.ts';
import { blueprintIdFilter, type ListedBlueprint, listBlueprints } from '../../read/blueprints.ts';
import { listCommands } from '../../read/commands.ts';
import { listLeases, type LeaseView } from '../../read/leases.ts';
import { listResources, type ResourceView } from '../../read/resources.ts';
import { commandLink, namedLink, objectLink, orDash, stateBadge, statusBadge, when } from '../format.ts';
import { blank } from '../forms.ts';
import { html } from '../html.ts';
import { sendPage } from '../layout.ts';
import { ListPaging, renderList, textFilter, type FilterField } from './listView.ts';

const LEASE_STATES = Object.keys(LIFECYCLES.lease);
const RESOURCE_STATES = Object.keys(LIFECYCLES.resource);
const COMMAND_STATUSES = ['queued', 'running', 'done', 'failed', 'cancelled', 'coalesced'] as const;
const SOURCES = ['web', 'cli', 'api', 'gc', 'system'] as const;

const stateFilter = (states: readonly string[]) => blank(z.enum(states as [string, ...string[]]).optional());
const blueprintFilter = blank(BlueprintRef.optional());

const BLUEPRINT_FIELD: FilterField = { name: 'blueprint', label: 'Blueprint', placeholder: 'name or id' };

/** The four lists: blueprints, resources, leases and commands, newest first, each with its filters. */
export async function listPages(app: FastifyInstance, db: Db): Promise<void> {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.route({
    method: 'GET',
    url: '/blueprints',
    config: { webAction: 'read' },
    schema: { querystring: z.object(ListPaging).strict() },
    handler: async (request, reply) => {
      const { query } = request;
      const page = await listBlueprints(db, { ...query, order: 'newest' });
      const main = renderList<ListedBlueprint>(request, {
        title: 'Blueprints',
        path: '/blueprints',
        filters: [],
        page,
        rowId: (b) => `blueprint-${b.id}`,
        columns: [
          { header: 'Id', cell: (b) => b.id },
          { header: 'Name', cell: (b) => namedLink('blueprint', b.id, b.name) },
          { header: 'State', cell: (b) => stateBadge('blueprint', b.state) },
          { header: 'Driver', cell: (b) => b.driver },
          {
            header: 'Resources',
            cell: (b) =>
              html`<a href="/resources?blueprint=${b.id}">${b.live_resources} live</a> <span class="muted">(${b.min_resources}–${b.max_resources})</span>`,
          },
          {
            header: 'Leases',
            cell: (b) =>
              html`<a href="/leases?blueprint=${b.id}">leases</a> <span class="muted">(${describeSlotsPerResource(b.leases_per_resource, b.slotsPerResource, true)} per resource)</span>`,
          },
          { header: 'Longest hold', cell: (b) => (b.max_hold_ms === null ? orDash(null) : formatDuration(b.max_hold_ms)) },
          { header: 'Commands', cell: (b) => html`<a href="/commands?target=blueprint:${b.id}">commands</a>` },
          { header: 'Created', cell: (b) => when(b.created_at) },
        ],
      });
      return sendPage(request, reply, { title: 'Blueprints', watch: ['*'], main });
    },
  });

  typed.route({
    method: 'GET',
    url: '/resources',
    config: { webAction: 'read' },
    schema: { querystring: z.object({ state: stateFilter(RESOURCE_STATES), blueprint: blueprintFilter, ...ListPaging }).strict() },
    handler: async (request, reply) => {
      const { query } = request;
      const { state, blueprint, ...paging } = query;
      const page = await listResources(db, { state, blueprintId: await blueprintIdFilter(db, blueprint) }, { ...paging, order: 'newest' });
      const main = renderList<ResourceView>(request, {
        title: 'Resources',
        path: '/resources',
        filters: [{ name: 'state', label: 'State', options: RESOURCE_STATES }, BLUEPRINT_FIELD],
        page,
        columns: [
          { header: 'Resource', cell: (r) => objectLink('resource', r.id) },
          { header: 'State', cell: (r) => stateBadge('resource', r.state) },
          { header: 'Blueprint', cell: (r) => r.blueprint_name },
          { header: 'Slots used', cell: (r) => `${r.slots_taken} of ${r.capacity}` },
          { header: 'Message', cell: (r) => orDash(r.message) },
          { header: 'Created', cell: (r) => when(r.created_at) },
        ],
      });
      return sendPage(request, reply, { title: 'Resources', watch: ['*'], main });
    },
  });

  typed.route({
    method: 'GET',
    url: '/leases',
    config: { webAction: 'read' },
    schema: { querystring: z.object({ state: stateFilter(LEASE_STATES), blueprint: blueprintFilter, holder: textFilter(), ...ListPaging }).strict() },
    handler: async (request, reply) => {
      const { query } = request;
      const { state, blueprint, holder, ...paging } = query;
      const filter = { state, holder, blueprintId: await blueprintIdFilter(db, blueprint) };
      const page = await listLeases(db, filter, { ...paging, order: 'newest' });
      const main = renderList<LeaseView>(request, {
        title: 'Leases',
        path: '/leases',
        filters: [
          { name: 'state', label: 'State', options: LEASE_STATES },
          BLUEPRINT_FIELD,
          { name: 'holder', label: 'Holder', placeholder: 'e.g. token:ci' },
        ],
        page,
        columns: [
          { header: 'Lease', cell: (l) => objectLink('lease', l.id) },
          { header: 'State', cell: (l) => stateBadge('lease', l.state) },
          { header: 'Holder', cell: (l) => l.holder },
          { header: 'Blueprint', cell: (l) => l.blueprint_name },
          { header: 'Resource', cell: (l) => (l.resource_id === null ? orDash(null) : objectLink('resource', l.resource_id)) },
          // As on the lease's page: a lease that can no longer be renewed has no deadline left to show.
          { header: 'Expires', cell: (l) => (accepts('lease', l.state, 'renew') ? when(l.expires_at) : orDash(null)) },
          { header: 'Created', cell: (l) => when(l.created_at) },
        ],
      });
      return sendPage(request, reply, { title: 'Leases', watch: ['*'], main });
    },
  });

  typed.route({
    method: 'GET',
    url: '/commands',
    config: { webAction: 'read' },
    schema: {
      querystring: z
        .object({
          status: blank(z.enum(COMMAND_STATUSES).optional()),
          source: blank(z.enum(SOURCES).optional()),
          issuer: textFilter(),
          target: blank(TargetRef.optional()),
          ...ListPaging,
        })
        .strict(),
    },
    handler: async (request, reply) => {
      const { query } = request;
      const { status, source, issuer, target, ...paging } = query;
      const page = await listCommands(db, { status, source, issuedBy: issuer, target }, { ...paging, order: 'newest' });
      const main = renderList<CommandRow>(request, {
        title: 'Commands',
        path: '/commands',
        filters: [
          { name: 'status', label: 'Status', options: COMMAND_STATUSES },
          { name: 'source', label: 'Source', options: SOURCES },
          { name: 'issuer', label: 'Issued by', placeholder: 'e.g. token:admin' },
          { name: 'target', label: 'Target', placeholder: 'e.g. lease:12' },
        ],
        page,
        columns: [
          { header: 'Command', cell: (c) => commandLink(c.id, c.kind) },
          { header: 'Target', cell: (c) => objectLink(c.target_kind, c.target_id) },
          { header: 'Status', cell: (c) => statusBadge(c.status) },
          { header: 'Issued by', cell: (c) => c.issued_by },
          { header: 'Source', cell: (c) => c.source },
          { header: 'Reason', cell: (c) => orDash(c.reason) },
          { header: 'Queued', cell: (c) => when(c.created_at) },
          { header: 'Finished', cell: (c) => when(c.finished_at) },
        ],
      });
      return sendPage(request, reply, { title: 'Commands', watch: ['*'], main });
    },
  });
}
