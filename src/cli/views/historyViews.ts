import type { HistoryShapeOf, TimelineEntryShape } from '../../api/shapes.ts';
import { formatTime, section } from '../format.ts';
import { commandName } from './commandViews.ts';

function timelineLine(entry: TimelineEntryShape): string {
  const what =
    entry.type === 'command'
      ? `command #${entry.id} ${entry.kind}: ${entry.status}${entry.queuedAt === entry.at ? '' : ` (queued ${formatTime(entry.queuedAt)})`}`
      : eventTitle(entry);
  const why = entry.reason ? `, reason: ${entry.reason}` : '';
  const message = entry.message ? ` — ${entry.message}` : '';
  return `${formatTime(entry.at)}  ${what}  [${entry.who} via ${entry.where}${why}]${message}`;
}

/** "state active → released (command #12)", "created pending". */
function eventTitle(entry: Extract<TimelineEntryShape, { type: 'event' }>): string {
  const transition = entry.toState ? ` ${entry.fromState ? `${entry.fromState} → ` : ''}${entry.toState}` : '';
  return `${entry.event}${transition}${entry.commandId ? ` (command #${entry.commandId})` : ''}`;
}

/** What `show` prints under an object's fields: its queue, then its timeline. */
export function renderHistory({ queue, timeline }: HistoryShapeOf): string {
  const queued = queue.map((c) => `${commandName(c)}: ${c.status}${c.message ? ` — ${c.message}` : ''}`);
  // Newest first, as the web UI shows it: what just happened is what a reader looks for.
  const title = timeline.truncated ? 'timeline, newest first (older entries left out)' : 'timeline, newest first';
  return `${section('queue', queued)}\n\n${section(title, [...timeline.entries].reverse().map(timelineLine))}`;
}
