import type { HistoryShapeOf, Lease, LineStandingShape } from '../../api/shapes.ts';
import { describeStanding } from '../../read/standingText.ts';
import { type Column, fields, formatJson, formatTime, NONE } from '../format.ts';
import { renderHistory } from './historyViews.ts';
import { formatDuration } from '../../domain/durations.ts';

export const LEASE_COLUMNS: readonly Column<Lease>[] = [
  { header: 'ID', value: (l) => String(l.id) },
  { header: 'STATE', value: (l) => l.state },
  { header: 'BLUEPRINT', value: (l) => l.blueprintName },
  { header: 'HOLDER', value: (l) => l.holder },
  { header: 'RESOURCE', value: (l) => (l.resourceId === null ? NONE : `${l.resourceId}/${l.slot}`) },
  { header: 'EXPIRES', value: (l) => formatTime(l.expiresAt) },
  { header: 'CREATED', value: (l) => formatTime(l.createdAt) },
];

export function renderLease(lease: Lease): string {
  return fields(`lease ${lease.id}: ${lease.state}`, [
    ['blueprint', `${lease.blueprintName} (${lease.blueprintId})`],
    ['holder', lease.holder],
    ['resource', lease.resourceId === null ? NONE : `${lease.resourceId}, slot ${lease.slot}`],
    ['attributes', formatJson(lease.attributes)],
    ['priority', String(lease.priority)],
    ['team', lease.team],
    ['selector', lease.selector ?? NONE],
    ['wait deadline', formatTime(lease.waitDeadline)],
    ['granted', formatTime(lease.grantedAt)],
    ['expires', formatTime(lease.expiresAt)],
    ['ends by', lease.endBy === null ? NONE : `${formatTime(lease.endBy)} at the latest (its blueprint's longest hold)`],
    ['ending', lease.ending === null ? NONE : `by ${formatTime(lease.ending.at)}: ${lease.ending.reason} (${lease.ending.kind})`],
    [
      'heartbeat',
      lease.heartbeatMs === null ? NONE : `every ${formatDuration(lease.heartbeatMs)}; next renewal due by ${formatTime(lease.heartbeatDeadline)}`,
    ],
    ['message', lease.message ?? NONE],
    ['created', formatTime(lease.createdAt)],
    ['updated', formatTime(lease.updatedAt)],
  ]);
}

export function renderLeaseDetail({ lease, line, ...history }: { lease: Lease; line: LineStandingShape | null } & HistoryShapeOf): string {
  const standing = line
    ? `\n\n${fields('waiting', [
        ['line', describeStanding(line)],
        ['why', line.reason ?? NONE],
        ['since', formatTime(line.since)],
        ['estimate from', line.basis],
      ])}`
    : '';
  return `${renderLease(lease)}${standing}\n\n${renderHistory(history)}`;
}
