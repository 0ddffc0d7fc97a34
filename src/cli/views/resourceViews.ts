import type { HistoryShapeOf, Resource, ResourceDetailShape } from '../../api/shapes.ts';
import { type Column, fields, formatJson, formatTime, NONE, section, formatLabels } from '../format.ts';
import { renderHistory } from './historyViews.ts';

export const RESOURCE_COLUMNS: readonly Column<Resource>[] = [
  { header: 'ID', value: (r) => String(r.id) },
  { header: 'STATE', value: (r) => r.state },
  { header: 'BLUEPRINT', value: (r) => r.blueprintName },
  { header: 'SLOTS', value: (r) => `${r.usedSlots}/${r.capacity}` },
  { header: 'CREATED', value: (r) => formatTime(r.createdAt) },
  { header: 'MESSAGE', value: (r) => r.message ?? '' },
];

/** "healthy, checked <time>", with the check's message; never checked: none. */
function healthOf(resource: Resource): string {
  if (resource.health === null || resource.checkedAt === null) return `${NONE} (never checked)`;
  return `${resource.health}${resource.healthMessage ? ` (${resource.healthMessage})` : ''}, checked ${formatTime(resource.checkedAt)}`;
}

export function renderResourceDetail({ resource, ...history }: { resource: ResourceDetailShape } & HistoryShapeOf): string {
  const summary = fields(`resource ${resource.id}: ${resource.state}`, [
    ['blueprint', `${resource.blueprintName} (${resource.blueprintId})`],
    ['slots used', `${resource.usedSlots} of ${resource.capacity}`],
    ['made for lease', resource.allocatedForLeaseId === null ? NONE : String(resource.allocatedForLeaseId)],
    ['attributes', formatJson(resource.attributes)],
    ['labels', formatLabels(resource.labels)],
    ['message', resource.message ?? NONE],
    ['health', healthOf(resource)],
    ['created', formatTime(resource.createdAt)],
    ['updated', formatTime(resource.updatedAt)],
  ]);
  const slots = [
    ...resource.slots.map((s) => `slot ${s.slot}: lease ${s.leaseId} (${s.holder}) since ${formatTime(s.grantedAt)}`),
    ...resource.cleaningSlots.map((slot) => `slot ${slot}: waiting to be cleaned`),
  ];
  return `${summary}\n\n${section('slots', slots)}\n\n${renderHistory(history)}`;
}
