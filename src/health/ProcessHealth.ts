import type { Logger } from '../log.ts';

/** One long-lived part's state, as /readyz reports it. */
export interface PartState {
  readonly state: 'up' | 'down';
  /** When it entered this state (ISO 8601). */
  readonly since: string;
  /** Why it is down: the last failure, one line. */
  readonly reason?: string;
}

/** What a part reports through: `up()` when it works, `down(error)` when it cannot. */
export interface PartHealth {
  up(): void;
  down(error: unknown): void;
  readonly isUp: boolean;
}

/**
 * The long-lived parts of one process (graphile-worker's runner, the API's
 * LISTEN connection...) and whether each works now. A part that reconnects by
 * itself reports each change of state here, which logs one line per change
 * (not per failed attempt) and lets /readyz say which part is down and since
 * when. A process whose parts are not all up must not look ready.
 */
export class ProcessHealth {
  private readonly parts = new Map<string, PartState>();

  constructor(private readonly log: Logger) {}

  /** Registers a part, up from now on until it says otherwise. */
  part(name: string): PartHealth {
    this.parts.set(name, { state: 'up', since: new Date().toISOString() });
    const health = this;
    return {
      up: () => health.set(name, 'up'),
      down: (error) => health.set(name, 'down', error),
      get isUp() {
        return health.parts.get(name)?.state === 'up';
      },
    };
  }

  /** Every part's state, and whether all are up. */
  snapshot(): { readonly ready: boolean; readonly parts: Readonly<Record<string, PartState>> } {
    const parts = Object.fromEntries(this.parts);
    return { ready: [...this.parts.values()].every((part) => part.state === 'up'), parts };
  }

  private set(name: string, state: PartState['state'], error?: unknown): void {
    const previous = this.parts.get(name);
    const reason = error === undefined ? undefined : oneLine(error);
    if (previous?.state === state) {
      // Still down: keep the time it went down, but the latest reason.
      if (state === 'down') this.parts.set(name, { ...previous, reason });
      return;
    }
    this.parts.set(name, { state, since: new Date().toISOString(), ...(reason === undefined ? {} : { reason }) });
    if (state === 'down') this.log.warn({ part: name, reason }, `${name} is down; reconnecting`);
    else this.log.info({ part: name, downSince: previous?.since }, `${name} is back up`);
  }
}

function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.slice(0, 300);
}
