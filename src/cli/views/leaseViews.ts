import type { ObjectHistory } from '../../read/objectHistory.ts';
import type { LeaseView } from '../../read/leases.ts';
import { type Column, fields, formatJson, formatTime, NONE } from '../format.ts';
import { renderHistory } from './historyViews.ts';

export const LEASE_COLUMNS: readonly Column<LeaseView>[] = [
  { header: 'ID', value: (l) => String(l.id) },
  { header: 'STATE', value: (l) => l.state },
  { header: 'BLUEPRINT', value: (l) => l.blueprint_name },
  { header: 'HOLDER', value: (l) => l.holder },
  { header: 'RESOURCE', value: (l) => (l.resource_id === null ? NONE : `${l.resource_id}/${l.slot}`) },
  { header: 'EXPIRES', value: (l) => formatTime(l.expires_at) },
  { header: 'CREATED', value: (l) => formatTime(l.created_at) },
];

export function renderLease(lease: LeaseView): string {
  return fields(`lease ${lease.id}: ${lease.state}`, [
    ['blueprint', `${lease.blueprint_name} (${lease.blueprint_id})`],
    ['holder', lease.holder],
    ['resource', lease.resource_id === null ? NONE : `${lease.resource_id}, slot ${lease.slot}`],
    ['attributes', formatJson(lease.attributes)],
    ['expires', formatTime(lease.expires_at)],
    ['heartbeat', lease.heartbeat_ms === null ? NONE : `every ${lease.heartbeat_ms / 1000} s; next renewal due by ${formatTime(lease.heartbeat_deadline)}`],
    ['message', lease.message ?? NONE],
    ['created', formatTime(lease.created_at)],
    ['updated', formatTime(lease.updated_at)],
  ]);
}

export function renderLeaseDetail({ lease, ...history }: { lease: LeaseView } & ObjectHistory): string {
  return `${renderLease(lease)}\n\n${renderHistory(history)}`;
}
