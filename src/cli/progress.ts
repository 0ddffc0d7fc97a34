import type { ObjectRef } from '../db/objectTables.ts';
import type { CommandTreeNodeShape, LineStandingShape } from '../api/shapes.ts';
import { describeWaiting } from '../read/standingText.ts';
import type { Transition } from '../read/objectState.ts';
import type { Output } from './output.ts';
import { progressLine } from './views/commandViews.ts';

/**
 * Turns the waiter's successive reads into progress lines: one per command
 * whose status or message changed since the last read (new commands
 * included; a yielding command keeps its status but says why it waits, e.g.
 * a driver retry), one per transition of the watched object, read from
 * its event log so that none is missed between two reads, and, while a
 * lease waits for capacity, its place in line whenever that reads
 * differently ("3rd in line at sandboxes (of 7), about 2 min").
 */
export function progressPrinter(
  out: Output,
  object?: ObjectRef,
): (snapshot: { tree: readonly CommandTreeNodeShape[]; transitions: readonly Transition[]; standing?: LineStandingShape | null }) => void {
  const seen = new Map<number, string>();
  const shownTransitions = new Set<number>();
  let shownStanding: string | undefined;
  return ({ tree, transitions, standing }) => {
    for (const node of tree) {
      const shown = `${node.status}:${node.message ?? ''}`;
      if (seen.get(node.id) === shown) continue;
      seen.set(node.id, shown);
      out.progress(progressLine(node));
    }
    for (const { eventId, from, to } of object ? transitions : []) {
      if (shownTransitions.has(eventId)) continue;
      shownTransitions.add(eventId);
      out.progress(`${object!.kind} ${object!.id}: ${from} → ${to}`);
    }
    const place = standing ? describeWaiting(standing) : undefined;
    if (place !== undefined && place !== shownStanding) out.progress(place);
    shownStanding = place;
  };
}
