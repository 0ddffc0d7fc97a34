import type { ObjectKind } from '../../migrations/schema.ts';
import { oldNamesOf } from '../domain/commandKinds.ts';

/** A subcommand that asks an object for a command kind. */
export interface KindRequest {
  readonly verb: string;
  readonly kind: string;
  readonly description: string;
}

/**
 * `requests`, the subcommands of `slipway <target>` that ask `target` for a
 * kind, each followed by one named after each old name of its kind (renamed
 * kinds, see domain/commandKinds.ts), hidden from help: it still works,
 * asking for the new kind as the old name is appended anyway, and says on
 * stderr (its `notice`) which subcommand to use instead.
 */
export function withOldNames<R extends KindRequest>(target: ObjectKind, requests: readonly R[]): Array<R & { notice?: string }> {
  return requests.flatMap((request) => [
    request,
    ...oldNamesOf(target, request.kind).map((old) => ({
      ...request,
      verb: old,
      notice: `"slipway ${target} ${old}" is deprecated: use "slipway ${target} ${request.verb}"`,
    })),
  ]);
}
