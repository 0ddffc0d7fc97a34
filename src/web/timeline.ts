import type { CommandRow, ObjectKind } from '../../migrations/schema.ts';
import type { Db } from '../db/Database.ts';
import { readCommandLinks, type LinkedCommand } from '../read/commandLinks.ts';
import type { Timeline } from '../read/objectHistory.ts';
import { commandLink, objectLink, orDash, stateBadge, statusBadge, took, when } from './format.ts';
import { html, type SafeHtml } from './html.ts';
import { dataTable } from './dataTable.ts';

function linkTo(command: LinkedCommand): SafeHtml {
  return html`${commandLink(command.id, command.kind)} on ${objectLink(command.targetKind, command.targetId)} ${statusBadge(command.status)}`;
}

/**
 * An object's one timeline, newest first: its commands (with their status)
 * and its events (with their transition), each with who asked, from where,
 * why and when, and the caused-by links both ways: which command (often on
 * another object) caused a command or event here, and what each command here
 * caused elsewhere. `kind`: the object's, whose states its events name.
 */
export async function renderTimeline(db: Db, kind: ObjectKind, timeline: Timeline): Promise<SafeHtml> {
  const commandIds = timeline.entries.filter((e) => e.type === 'command').map((e) => e.id);
  const links = await readCommandLinks(db, commandIds);
  const rows = [...timeline.entries].reverse().map((entry) => {
    if (entry.type === 'command') {
      const causedBy = links.causedBy.get(entry.id);
      const caused = links.caused.get(entry.id) ?? [];
      return html`<tr class="command">
<td>${when(entry.at)}</td>
<td>${commandLink(entry.id, entry.kind)}</td>
<td>${statusBadge(entry.status)}${entry.finishedAt ? html` <span class="muted">queued ${when(entry.queuedAt)}, took ${took(entry.queuedAt, entry.finishedAt)}</span>` : ''}</td>
<td>${entry.who} <span class="muted">(${entry.where})</span></td>
<td>${orDash(entry.reason)}</td>
<td>${orDash(entry.message)}
${causedBy ? html`<div>caused by ${linkTo(causedBy)}</div>` : ''}
${caused.map((child) => html`<div>caused ${linkTo(child)}</div>`)}</td>
</tr>`;
    }
    return html`<tr class="event">
<td>${when(entry.at)}</td>
<td>${entry.event}</td>
<td>${entry.fromState || entry.toState ? html`${entry.fromState ? stateBadge(kind, entry.fromState) : ''} → ${entry.toState ? stateBadge(kind, entry.toState) : ''}` : ''}</td>
<td>${entry.who} <span class="muted">(${entry.where})</span></td>
<td>${orDash(entry.reason)}</td>
<td>${entry.message}${entry.commandId !== null ? html`<div>by ${commandLink(entry.commandId)}</div>` : ''}</td>
</tr>`;
  });
  return html`<h2>Timeline</h2>
${timeline.truncated ? html`<p class="muted">Only the latest entries are shown.</p>` : ''}
${
  rows.length === 0
    ? html`<p class="muted">Nothing yet.</p>`
    : html`<div class="table-wrap"><table class="timeline">
<thead><tr><th>When</th><th>What</th><th>Status</th><th>Who (from)</th><th>Reason</th><th>Outcome and links</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}`;
}

/** The object's queue: commands queued or running, oldest first (the order they will be applied in). */
export function renderQueue(queue: readonly CommandRow[], cancel: (command: CommandRow) => SafeHtml): SafeHtml {
  return html`<h2>Queue</h2>
${
  queue.length === 0
    ? html`<p class="muted">Empty: nothing queued or running.</p>`
    : dataTable(
        [
          { header: 'Command', cell: (c) => commandLink(c.id, c.kind) },
          { header: 'Status', cell: (c) => statusBadge(c.status) },
          { header: 'Issued by', cell: (c) => html`${c.issued_by} <span class="muted">(${c.source})</span>` },
          { header: 'Reason', cell: (c) => orDash(c.reason) },
          { header: 'Queued', cell: (c) => when(c.created_at) },
          { header: '', cell: (c) => cancel(c) },
        ],
        queue,
      )
}`;
}
