import type { Callback } from '../../api/shapes.ts';
import { type Column, formatTime, NONE, section, table } from '../format.ts';

const ATTEMPT_COLUMNS: readonly Column<Callback['attemptLog'][number]>[] = [
  { header: 'ATTEMPT', value: (a) => String(a.attempt) },
  { header: 'AT', value: (a) => formatTime(a.startedAt) },
  { header: 'STATUS', value: (a) => (a.statusCode === null ? NONE : String(a.statusCode)) },
  { header: 'NEXT RETRY', value: (a) => formatTime(a.nextRetryAt) },
  { header: 'ERROR', value: (a) => a.error ?? '' },
];

/** "delivered", "pending: attempt 3 at ...": where a callback stands. */
function callbackStatus(callback: Callback): string {
  switch (callback.status) {
    case 'waiting':
      return 'waiting for the command and what it caused to settle';
    case 'pending':
      return `pending: attempt ${callback.attempts + 1} at ${formatTime(callback.nextAttemptAt)}`;
    default:
      return `${callback.status} after ${callback.attempts} attempt${callback.attempts === 1 ? '' : 's'}`;
  }
}

/** The callbacks section of `command show`: each URL, its status and its attempts. */
export function renderCallbacks(callbacks: readonly Callback[]): string {
  const lines = callbacks.flatMap((callback) => [
    `#${callback.id} ${callback.url}: ${callbackStatus(callback)}`,
    ...(callback.attemptLog.length === 0
      ? []
      : table(callback.attemptLog, ATTEMPT_COLUMNS)
          .split('\n')
          .map((l) => `  ${l}`)),
  ]);
  return section('callbacks', lines);
}
