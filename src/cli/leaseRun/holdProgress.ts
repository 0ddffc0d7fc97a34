import type { HoldEvent } from '../../client/holdLease.ts';
import { describeWaiting } from '../../read/standingText.ts';
import { formatTime, printableLines } from '../format.ts';

/**
 * `lease run`'s progress, on stderr (stdout is its command's alone), each
 * line marked as Slipway's so that it stands apart from the command's own.
 */
export function sayOnStderr(line: string): void {
  process.stderr.write(`slipway: ${printableLines(line)}\n`);
}

/** One line per event of holding the lease, or none. */
export function holdProgressLine(event: HoldEvent): string | undefined {
  switch (event.type) {
    case 'requested':
      return `lease ${event.lease.id} requested at ${event.lease.blueprintName}`;
    case 'waiting': {
      const { lease, line } = event;
      const place = line ? describeWaiting(line) : `lease ${lease.id} is ${lease.state}`;
      return lease.message ? `${place}: ${lease.message}` : place;
    }
    case 'active': {
      const { lease, resource } = event.held;
      return `lease ${lease.id} active: slot ${lease.slot} of resource ${resource.id} (${lease.blueprintName})`;
    }
    case 'retrying':
      return `Slipway cannot be reached (${event.error.message}); trying again until ${formatTime(event.giveUpAt)}`;
    case 'reconnected':
      return 'Slipway can be reached again';
    case 'released':
      return `lease ${event.lease.id} released: ${event.reason}`;
    case 'release_failed':
      return `could not release lease ${event.lease.id} (${event.error.message}); its heartbeat deadline will free it`;
  }
}
