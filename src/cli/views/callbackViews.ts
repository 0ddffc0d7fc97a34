import type { CallbackAttemptRow } from '../../../migrations/schema.ts';
import type { CallbackView } from '../../read/callbacks.ts';
import { type Column, formatTime, NONE, section, table } from '../format.ts';

const ATTEMPT_COLUMNS: readonly Column<CallbackAttemptRow>[] = [
  { header: 'ATTEMPT', value: (a) => String(a.attempt) },
  { header: 'AT', value: (a) => formatTime(a.started_at) },
  { header: 'STATUS', value: (a) => (a.status_code === null ? NONE : String(a.status_code)) },
  { header: 'NEXT RETRY', value: (a) => formatTime(a.next_retry_at) },
  { header: 'ERROR', value: (a) => a.error ?? '' },
];

/** "delivered", "pending: attempt 3 at ...": where a callback stands. */
function callbackStatus(callback: CallbackView): string {
  switch (callback.status) {
    case 'waiting':
      return 'waiting for the command and what it caused to settle';
    case 'pending':
      return `pending: attempt ${callback.attempts + 1} at ${formatTime(callback.next_attempt_at)}`;
    default:
      return `${callback.status} after ${callback.attempts} attempt${callback.attempts === 1 ? '' : 's'}`;
  }
}

/** The callbacks section of `command show`: each URL, its status and its attempts. */
export function renderCallbacks(callbacks: readonly CallbackView[]): string {
  const lines = callbacks.flatMap((callback) => [
    `#${callback.id} ${callback.url}: ${callbackStatus(callback)}`,
    ...(callback.attempt_log.length === 0 ? [] : table(callback.attempt_log, ATTEMPT_COLUMNS).split('\n').map((l) => `  ${l}`)),
  ]);
  return section('callbacks', lines);
}
