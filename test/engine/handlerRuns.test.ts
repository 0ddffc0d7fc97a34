import { expect, test } from 'vitest';
import type { ObjectKind } from '../../migrations/schema.ts';
import { commandKindSpec, COMMAND_KINDS } from '../../src/domain/commandKinds.ts';
import { handlerOf } from '../../src/drain/commandDisposition.ts';
import { joinsRuns } from '../../src/drain/Handler.ts';

/** Every handler marked `inRuns`, as "<object kind>.<command kind>". */
const inRuns = (Object.keys(COMMAND_KINDS) as ObjectKind[]).flatMap((target) =>
  Object.keys(COMMAND_KINDS[target])
    .filter((kind) => {
      const handler = handlerOf(target, kind);
      return handler !== undefined && joinsRuns(handler);
    })
    .map((kind) => ({ target, kind, handler: handlerOf(target, kind)! })),
);

test('the handlers that join runs are those of the bursts a resource or a blueprint gets', () => {
  expect(inRuns.map(({ target, kind }) => `${target}.${kind}`)).toEqual([
    'resource.acquire',
    'resource.release_slot',
    'blueprint.need_resource',
    'blueprint.slot_freed',
    'blueprint.resource_destroyed',
    'blueprint.serve_waiters',
  ]);
});

// What Handler.ts asks of an `inRuns` handler, as far as it can be checked
// without running it (its types say as much, test/engine/handlerShapes.test.ts):
// it is decided in the middle of a step, after the effects and batched reads
// of that step were made, and a command done that supersedes others would
// cancel commands further along its own run.
test.each(inRuns)('$target.$kind joins runs: no batched read, no effect, and its kind supersedes nothing', ({ target, kind, handler }) => {
  expect(['pure', 'querying']).toContain(handler.shape);
  expect(commandKindSpec(target, kind)?.supersedes ?? []).toEqual([]);
});
