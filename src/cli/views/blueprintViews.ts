import { describePreemption } from '../../domain/preemption.ts';
import { describePriorityStep } from '../../domain/priority.ts';
import { describeLongestHold } from '../../domain/ending.ts';
import { describeHalfLife } from '../../domain/fairShare.ts';
import type { Blueprint, BlueprintDetailShape, HistoryShapeOf, ListedBlueprintShape, Orphan } from '../../api/shapes.ts';
import { type Column, fields, formatJson, formatTime, NONE, formatLabels, table } from '../format.ts';
import { renderHistory } from './historyViews.ts';
import { formatDuration } from '../../domain/durations.ts';
import { ORPHANS_SETTINGS } from '../../domain/orphans.ts';
import { describeSlotsPerResource, type SlotRange } from '../../domain/slotsPerResource.ts';

export const BLUEPRINT_COLUMNS: readonly Column<ListedBlueprintShape>[] = [
  { header: 'ID', value: (b) => String(b.id) },
  { header: 'NAME', value: (b) => b.name },
  { header: 'DRIVER', value: (b) => b.driver },
  { header: 'STATE', value: (b) => b.state },
  { header: 'RESOURCES', value: (b) => `${b.liveResources}/${b.maxResources}` },
  { header: 'LEASES/RESOURCE', value: (b) => describeSlotsPerResource(b.leasesPerResource, b.slotsPerResource, true) },
  { header: 'LONGEST HOLD', value: (b) => (b.maxHoldMs === null ? NONE : formatDuration(b.maxHoldMs)) },
  { header: 'CREATED', value: (b) => formatTime(b.createdAt) },
];

/** "active 2, pending 1" */
function counts(byState: Record<string, number>): string {
  const entries = Object.entries(byState);
  return entries.length === 0 ? NONE : entries.map(([state, n]) => `${state} ${n}`).join(', ');
}

/** A blueprint's fields; with its detail's `slotsPerResource`, the leases per resource its live resources take. */
export function renderBlueprint(blueprint: Blueprint & { readonly slotsPerResource?: SlotRange | null }): string {
  return fields(`blueprint ${blueprint.name} (${blueprint.id}): ${blueprint.state}`, [
    ['driver', blueprint.driver],
    ['settings', formatJson(blueprint.settings)],
    ['resources', `${blueprint.liveResources} live, at most ${blueprint.maxResources}`],
    ['warm minimum', String(blueprint.minResources)],
    ['idle timeout', blueprint.idleTimeoutMs === null ? 'none (idle resources are kept)' : formatDuration(blueprint.idleTimeoutMs)],
    ['checks', blueprint.checkIntervalMs === null ? 'none (resources are trusted as made)' : `every ${formatDuration(blueprint.checkIntervalMs)}`],
    ['cleaning', blueprint.cleanBetweenLeases ? `between leases; quarantined after ${blueprint.cleanAttempts} failure(s) in a row` : 'none'],
    ['priorities', describePriorityStep(blueprint.priorityStepMs)],
    ['longest hold', describeLongestHold(blueprint.maxHoldMs)],
    ['fair share', describeHalfLife(blueprint.fairShareHalfLifeMs)],
    ['preemption', describePreemption(blueprint.preemption)],
    ['labels', formatLabels(blueprint.labels)],
    ['orphans', `${blueprint.orphans}: ${ORPHANS_SETTINGS[blueprint.orphans]}`],
    ['leases/resource', describeSlotsPerResource(blueprint.leasesPerResource, blueprint.slotsPerResource)],
    ['created', formatTime(blueprint.createdAt)],
  ]);
}

export function renderBlueprintDetail({ blueprint, ...history }: { blueprint: BlueprintDetailShape } & HistoryShapeOf): string {
  const usage = fields('usage', [
    ['resources', counts(blueprint.resourcesByState)],
    ['leases', counts(blueprint.leasesByState)],
    ['waiting leases', String(blueprint.waitingLeases)],
  ]);
  return `${renderBlueprint(blueprint)}\n\n${usage}\n\n${renderHistory(history)}`;
}

const ORPHAN_COLUMNS: readonly Column<Orphan>[] = [
  { header: 'ID', value: (o) => o.id },
  { header: 'RESOURCE', value: (o) => (o.resourceId === null ? NONE : String(o.resourceId)) },
  { header: 'SLOT', value: (o) => (o.slot === null ? NONE : String(o.slot)) },
  { header: 'ATTRIBUTES', value: (o) => formatJson(o.attributes) },
  { header: 'PASSES', value: (o) => String(o.passes) },
  { header: 'FIRST SEEN', value: (o) => formatTime(o.firstSeenAt) },
];

export function renderOrphans({ blueprint, orphans }: { blueprint: string; orphans: readonly Orphan[] }): string {
  if (orphans.length === 0) return `blueprint ${blueprint}: no orphans (or its driver cannot list what it holds)`;
  return `blueprint ${blueprint}: ${orphans.length} orphan(s)\n${table(orphans, ORPHAN_COLUMNS)}`;
}
