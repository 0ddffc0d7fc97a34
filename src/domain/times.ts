/**
 * An instant as Slipway writes it for people, in messages, views and pages:
 * UTC to the millisecond, "2026-11-22 02:02:30.993Z". The API's timestamp
 * fields stay ISO 8601 ("…T…Z"), for programs. Durations: formatDuration
 * (durations.ts).
 */
export function formatTime(at: Date | string): string {
  return (typeof at === 'string' ? at : at.toISOString()).replace('T', ' ');
}
