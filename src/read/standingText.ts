// A waiting lease's place in words, apart from the reads that find it
// (src/read/lineStanding.ts): the CLI prints it from the API's answers in remote mode
// without loading the query builder.

/** Where a waiting lease stands in its blueprint's line, and when it may expect to be active. */
export interface LineStanding {
  readonly blueprintName: string;
  /** 1: next to be served. */
  readonly position: number;
  /** How many wait at the blueprint, this lease included. */
  readonly waiting: number;
  readonly since: Date;
  /** Seconds from now, to the millisecond (lineStanding.ts, estimateFor); null when there is nothing to go by yet. */
  readonly estimateSeconds: number | null;
  /** What the estimate rests on, or why there is none. */
  readonly basis: string;
  /** Why it waits, as its blueprint said when it joined the line (null: a worker from before migration 0030 queued it). */
  readonly reason: string | null;
  /** Why nothing it was sent to can serve it (then there is no estimate); null when something may. */
  readonly unservable: string | null;
}

/** An estimate in words, as the CLI and the web UI give it: "about 2 min", "about 1 h 20 min", "under a minute". */
export function describeEstimate(seconds: number | null): string {
  if (seconds === null) return 'no estimate';
  if (seconds < 60) return 'under a minute';
  const minutes = Math.round(seconds / 60);
  return minutes < 60 ? `about ${minutes} min` : `about ${Math.floor(minutes / 60)} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** A place in line as an ordinal: 1st, 2nd, 3rd, 4th, 11th, 21st. */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th');
  return `${n}${suffix}`;
}

type Standing = Pick<LineStanding, 'position' | 'waiting' | 'blueprintName' | 'estimateSeconds' | 'unservable'>;

/**
 * The waiting CLI's progress line and `lease show`'s: "3rd in line at
 * sandboxes (of 7), about 2 min"; for a lease nothing can serve, that and
 * why, never an estimate: "1st in line at hosts (of 1), but it cannot be
 * served: …".
 */
export function describeStanding(standing: Standing): string {
  const place = `${ordinal(standing.position)} in line at ${standing.blueprintName} (of ${standing.waiting})`;
  return standing.unservable !== null
    ? `${place}, but it cannot be served: ${standing.unservable}`
    : `${place}, ${describeEstimate(standing.estimateSeconds)}`;
}

/** Its place and why it waits, in one progress line: "3rd in line at sandboxes (of 7), about 2 min: at its limit; …". */
export function describeWaiting(standing: Standing & Pick<LineStanding, 'reason'>): string {
  return standing.reason && standing.unservable === null ? `${describeStanding(standing)}: ${standing.reason}` : describeStanding(standing);
}
