import type { BlueprintRow } from '../../migrations/schema.ts';
import { type Labels, labelsText, matches, mismatch, resourceLabels, type Selector, whyNeverMatches } from './labels.ts';
import { isSettingUp, liveStates } from './lifecycle.ts';

/**
 * What a blueprint's stored labels say of a selector: its own labels and
 * those its driver may report (`possible_labels`, written with its
 * settings), or, where its driver's program decides them, what the
 * resources it made for the selector came back with (decision 0038).
 */
type BlueprintLabels = Pick<BlueprintRow, 'name' | 'driver' | 'labels' | 'possible_labels'>;

/** Whether the blueprint's driver leaves its resources' labels to its program: none is known before a resource is made. */
export function programDecidesLabels(blueprint: Pick<BlueprintRow, 'possible_labels'>): boolean {
  return blueprint.possible_labels === null;
}

/** Why no resource `blueprint` may have can ever match `selector` (see whyNeverMatches), or undefined. */
export function whyBlueprintNeverMatches(blueprint: Pick<BlueprintRow, 'labels' | 'possible_labels'>, selector: Selector): string | undefined {
  return whyNeverMatches(selector, blueprint.labels as Labels, (blueprint.possible_labels as Labels[] | null) ?? undefined);
}

/** A resource made for a selector (its `selector`), as read to judge what the blueprint's program makes for it. */
export interface MadeForSelector {
  readonly id: number;
  readonly state: string;
  /** As its driver reported them (the blueprint's go over them). */
  readonly labels: unknown;
  readonly created_at: Date;
}

/** The states of a resource that is not gone. */
const LIVE = liveStates('resource');

/**
 * The resources that show that `blueprint`'s program does not make one
 * that matches `selector` for a lease requested at `requestedAt`: made for
 * that selector, back from the driver with labels that do not match it
 * (not being made, nor broken, which may have reported none), and either
 * still live, or made since the lease was requested (so one made for this
 * lease counts after it is gone). Making another would make another such:
 * the blueprint does not, and the lease says why it cannot be served.
 * None where the resources' labels are known before they are made: a static
 * pool whose free entry did not match has others that may.
 */
export function unmatchedMadeFor(
  blueprint: Pick<BlueprintRow, 'labels' | 'possible_labels'>,
  selector: Selector,
  requestedAt: Date,
  made: readonly MadeForSelector[],
): MadeForSelector[] {
  if (!programDecidesLabels(blueprint)) return [];
  return made.filter(
    (r) =>
      !isSettingUp('resource', r.state) &&
      r.state !== 'broken' &&
      (LIVE.includes(r.state) || r.created_at.getTime() >= requestedAt.getTime()) &&
      !matches(selector, resourceLabels(r.labels, blueprint.labels)),
  );
}

/** Why a lease with `selector` cannot be served at `blueprint`, whose program made the `unmatched` resources for it (see unmatchedMadeFor). */
export function describeUnmatched(
  blueprint: BlueprintLabels,
  selectorText: string,
  selector: Selector,
  unmatched: readonly MadeForSelector[],
): string {
  const each = unmatched.map((r) => {
    const labels = resourceLabels(r.labels, blueprint.labels);
    return `resource ${r.id}, ${labelsText(labels) ? `labelled ${labelsText(labels)}` : 'with no labels'} (${mismatch(selector, labels)})`;
  });
  return (
    `${each.join(', ')}, made for selector ${selectorText}, came back not matching it, ` +
    `and blueprint ${blueprint.name}'s ${blueprint.driver} program decides every resource's labels, so it makes no other for this lease: ` +
    'change the selector, or label the blueprint'
  );
}
