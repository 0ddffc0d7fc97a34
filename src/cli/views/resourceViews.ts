import type { ObjectHistory } from '../../read/objectHistory.ts';
import type { ResourceDetail, ResourceView } from '../../read/resources.ts';
import { type Column, fields, formatJson, formatTime, NONE, section } from '../format.ts';
import { renderHistory } from './historyViews.ts';

export const RESOURCE_COLUMNS: readonly Column<ResourceView>[] = [
  { header: 'ID', value: (r) => String(r.id) },
  { header: 'STATE', value: (r) => r.state },
  { header: 'BLUEPRINT', value: (r) => r.blueprint_name },
  { header: 'SLOTS', value: (r) => `${r.used_slots}/${r.capacity}` },
  { header: 'CREATED', value: (r) => formatTime(r.created_at) },
  { header: 'MESSAGE', value: (r) => r.message ?? '' },
];

export function renderResourceDetail({ resource, ...history }: { resource: ResourceDetail } & ObjectHistory): string {
  const summary = fields(`resource ${resource.id}: ${resource.state}`, [
    ['blueprint', `${resource.blueprint_name} (${resource.blueprint_id})`],
    ['slots used', `${resource.used_slots} of ${resource.capacity}`],
    ['made for lease', resource.allocated_for_lease_id === null ? NONE : String(resource.allocated_for_lease_id)],
    ['attributes', formatJson(resource.attributes)],
    ['message', resource.message ?? NONE],
    ['created', formatTime(resource.created_at)],
    ['updated', formatTime(resource.updated_at)],
  ]);
  const slots = resource.slots.map((s) => `slot ${s.slot}: lease ${s.lease_id} (${s.holder}) since ${formatTime(s.granted_at)}`);
  return `${summary}\n\n${section('slots', slots)}\n\n${renderHistory(history)}`;
}
