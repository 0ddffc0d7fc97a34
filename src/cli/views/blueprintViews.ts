import type { BlueprintRow } from '../../../migrations/schema.ts';
import type { BlueprintDetail } from '../../read/blueprints.ts';
import type { ObjectHistory } from '../../read/objectHistory.ts';
import { type Column, fields, formatJson, formatTime, NONE } from '../format.ts';
import { renderHistory } from './historyViews.ts';

export const BLUEPRINT_COLUMNS: readonly Column<BlueprintRow>[] = [
  { header: 'ID', value: (b) => String(b.id) },
  { header: 'NAME', value: (b) => b.name },
  { header: 'DRIVER', value: (b) => b.driver },
  { header: 'STATE', value: (b) => b.state },
  { header: 'RESOURCES', value: (b) => `${b.live_resources}/${b.max_resources}` },
  { header: 'LEASES/RESOURCE', value: (b) => String(b.leases_per_resource) },
  { header: 'CREATED', value: (b) => formatTime(b.created_at) },
];

/** "active 2, pending 1" */
function counts(byState: Record<string, number>): string {
  const entries = Object.entries(byState);
  return entries.length === 0 ? NONE : entries.map(([state, n]) => `${state} ${n}`).join(', ');
}

export function renderBlueprint(blueprint: BlueprintRow): string {
  return fields(`blueprint ${blueprint.name} (${blueprint.id}): ${blueprint.state}`, [
    ['driver', blueprint.driver],
    ['settings', formatJson(blueprint.settings)],
    ['resources', `${blueprint.live_resources} live, at most ${blueprint.max_resources}`],
    ['warm minimum', String(blueprint.min_resources)],
    ['idle timeout', blueprint.idle_timeout_ms === null ? 'none (idle resources are kept)' : `${blueprint.idle_timeout_ms / 1000} s`],
    ['leases/resource', String(blueprint.leases_per_resource)],
    ['created', formatTime(blueprint.created_at)],
  ]);
}

export function renderBlueprintDetail({ blueprint, ...history }: { blueprint: BlueprintDetail } & ObjectHistory): string {
  const usage = fields('usage', [
    ['resources', counts(blueprint.resourcesByState)],
    ['leases', counts(blueprint.leasesByState)],
    ['waiting leases', String(blueprint.waitingLeases)],
  ]);
  return `${renderBlueprint(blueprint)}\n\n${usage}\n\n${renderHistory(history)}`;
}
