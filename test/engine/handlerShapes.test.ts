import { expect, test } from 'vitest';
import { done, type HandlerTable } from '../../src/drain/Handler.ts';
import { slotReturnsBatch } from '../../src/drain/handlers/slotsGivenBack.ts';

// Checked by `npm run typecheck`: each handler marked below must fail to compile.
test('a handler whose options the drain cannot honour does not compile', () => {
  const batch = slotReturnsBatch(() => undefined);
  const handlers = () =>
    [
      {
        resource: {
          // @ts-expect-error a handler that calls its driver cannot join runs
          acquire: { shape: 'effectful', inRuns: true, effect: async () => 1, decide: () => done('x') },
        } satisfies HandlerTable<'resource'>,
      },
      {
        lease: {
          // @ts-expect-error a release supersedes queued kinds, which may be further along its own run
          release: { shape: 'querying', inRuns: true, decide: () => done('x') },
        } satisfies HandlerTable<'lease'>,
      },
      {
        lease: {
          // @ts-expect-error statements shared under the row locks come with decisions that query there
          destroy: { shape: 'lockedBatch', lockedBatch: batch, decide: () => done('x') },
        } satisfies HandlerTable<'lease'>,
      },
      {
        lease: {
          // @ts-expect-error a pure decision gets no Db to query through
          allocate: { shape: 'pure', decide: (trx: unknown, ctx: unknown) => done(`${trx}${ctx}`) },
        } satisfies HandlerTable<'lease'>,
      },
      {
        lease: {
          // @ts-expect-error only a handler that calls its driver or shares locked statements reads in batches
          renew: { shape: 'querying', read: { key: () => undefined, load: async () => new Map() }, decide: () => done('x') },
        } satisfies HandlerTable<'lease'>,
      },
      {
        // @ts-expect-error a kind its object does not have
        lease: { acquire: { shape: 'pure', decide: () => done('x') } } satisfies HandlerTable<'lease'>,
      },
    ] as const;
  expect(typeof handlers).toBe('function');
});
