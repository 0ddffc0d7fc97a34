import { beforeAll, expect, test } from 'vitest';
import { NotFoundError } from '../../src/domain/errors.ts';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { NoticeListener } from '../../src/read/CommandNotices.ts';
import type { TreeQuery, TreeRead } from '../../src/read/commandTree.ts';
import { CommandTreeReads } from '../../src/read/CommandTreeReads.ts';
import { waitForSettled, type WaitSnapshot } from '../../src/read/waitForSettled.ts';
import { cliTestEnv } from './cliTestEnv.ts';

const env = cliTestEnv();
const actor = { issuedBy: 'tester', source: 'cli' } as const;
const activeOrGone = (state: string) => !['pending', 'acquired'].includes(state);

beforeAll(async () => {
  await createBlueprint(env.database.db, { name: 'sim', driver: 'simulated', maxResources: 2 }, actor);
});

test('wakes on the drain’s notices, not on its fallback timer', async () => {
  const { lease, command } = await createLease(env.database.db, { blueprint: 'sim', holder: 'h' }, actor);
  const snapshots: WaitSnapshot[] = [];
  // The fallback is longer than the timeout: only notices can end this wait in time.
  const result = await waitForSettled(env.database, {
    rootId: command.id,
    object: { ref: { kind: 'lease', id: lease.id }, until: activeOrGone },
    timeoutMs: 30_000,
    fallbackMs: 60_000,
    onSnapshot: (snapshot) => {
      snapshots.push(snapshot);
    },
  });
  expect(result.outcome).toBe('settled');
  expect(result.objectState).toBe('active');
  expect(result.tree.map((c) => c.status).every((s) => s === 'done')).toBe(true);
  // The tree grew as the drains added to it: need_resource → acquire → grant (which activates).
  expect(snapshots[0]!.tree.length).toBeLessThan(result.tree.length);
  expect(result.tree.map((c) => `${c.target_kind}:${c.kind}`)).toEqual(
    expect.arrayContaining(['blueprint:need_resource', 'resource:acquire', 'lease:grant']),
  );
});

/** Tree reads that count themselves. */
class CountedTreeReads extends CommandTreeReads {
  count = 0;
  override read(query: TreeQuery): Promise<TreeRead> {
    this.count++;
    return super.read(query);
  }
}

test('a wait that reports no progress follows the notices down the tree and reads it once, when all of it has settled', async () => {
  const { lease, command: create } = await createLease(env.database.db, { blueprint: 'sim', holder: 'h' }, actor);
  const object = { ref: { kind: 'lease', id: lease.id }, until: activeOrGone } as const;
  await waitForSettled(env.database, { rootId: create.id, object, timeoutMs: 30_000 });
  const listener = await NoticeListener.open(env.database.pool);
  const notices = listener.subscribe();
  try {
    // Subscribed before the append, as the API does for `?wait`: the wait starts from the command it appended.
    const { command } = await appendCommand(env.database.db, { target: object.ref, kind: 'release', actor });
    const trees = new CountedTreeReads(env.database.pool);
    const result = await waitForSettled(env.database, {
      rootId: command.id,
      timeoutMs: 30_000,
      // Longer than the timeout: only notices can end this wait in time.
      fallbackMs: 60_000,
      trees,
      since: { notices, tree: [{ ...command, depth: 0 }] },
    });
    expect(result.outcome).toBe('settled');
    // The release's notice named the count of slots it caused (it gave back its resource's only slot); that one's notice said it settled too.
    expect(result.tree.map((c) => `${c.target_kind}:${c.kind}:${c.status}`)).toEqual(['lease:release:done', 'resource:count_slots:done']);
    expect(trees.count).toBe(1);
  } finally {
    await notices.close();
    await listener.close();
  }
});

test('stops at once when aborted, leaving the commands to carry on', async () => {
  const { lease, command } = await createLease(env.database.db, { blueprint: 'sim', holder: 'h' }, actor);
  const controller = new AbortController();
  const waiting = waitForSettled(env.database, {
    rootId: command.id,
    // Never satisfied: only the abort ends it.
    object: { ref: { kind: 'lease', id: lease.id }, until: () => false },
    timeoutMs: 60_000,
    fallbackMs: 60_000,
    signal: controller.signal,
    onSnapshot: () => controller.abort(),
  });
  expect((await waiting).outcome).toBe('aborted');
});

test('a command that does not exist is not found', async () => {
  await expect(waitForSettled(env.database, { rootId: 999_999, timeoutMs: 1000 })).rejects.toThrow(NotFoundError);
});
