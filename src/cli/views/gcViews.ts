import type { GcPassReport } from '../../gc/runCollector.ts';
import { formatTime, NONE, section, table } from '../format.ts';

/** One pass: a heading line, then each step's findings, the commands it asked for and the tables it maintained. */
export function renderPass(pass: GcPassReport): string {
  const heading = `gc pass ${pass.id} (${pass.trigger}): ${pass.status}${pass.message ? ` — ${pass.message}` : ''}, ${formatTime(pass.startedAt)} → ${formatTime(pass.finishedAt)}`;
  const steps = Object.entries(pass.steps).map(([name, step]) => {
    const pruned = step.pruned
      ? Object.entries(step.pruned)
          .map(([what, n]) => `${n} ${what}`)
          .join(', ')
      : undefined;
    const summary = `${name}: found ${step.found}${pruned ? `; pruned ${pruned}` : ''}${step.truncated ? ' (stopped at its bound; the next pass goes on)' : ''}`;
    return section(summary, [
      ...step.actions.map(
        (a) =>
          `${a.kind} ${a.target}: ${a.refused ? `refused: ${a.refused}` : `${a.coalesced ? 'joined' : 'queued as'} command ${a.commandId}`} — ${a.reason}`,
      ),
      ...(step.maintained ?? []).map((m) => `${m.maintenance} ${m.table} — ${m.reason}`),
    ]);
  });
  return [heading, ...steps.map((s) => s.replace(/^/gm, '  '))].join('\n');
}

const actionCount = (pass: GcPassReport) => Object.values(pass.steps).reduce((n, step) => n + step.actions.length, 0);
const prunedCount = (pass: GcPassReport) =>
  Object.values(pass.steps).reduce((n, step) => n + Object.values(step.pruned ?? {}).reduce((a, b) => a + b, 0), 0);

/** Recent passes, newest first, one line each. */
export function renderPasses(passes: readonly GcPassReport[]): string {
  return table(passes, [
    { header: 'PASS', value: (p) => String(p.id) },
    { header: 'TRIGGER', value: (p) => p.trigger },
    { header: 'STATUS', value: (p) => p.status },
    { header: 'STARTED', value: (p) => formatTime(p.startedAt) },
    { header: 'FINISHED', value: (p) => formatTime(p.finishedAt) },
    { header: 'COMMANDS', value: (p) => String(actionCount(p)) },
    { header: 'PRUNED', value: (p) => String(prunedCount(p)) },
    { header: 'MESSAGE', value: (p) => p.message ?? NONE },
  ]);
}
