import { sql } from 'kysely';
import { beforeAll, expect, test } from 'vitest';
import { createBlueprint } from '../../src/objects/createBlueprint.ts';
import { createLease } from '../../src/objects/createLease.ts';
import { appendCommand } from '../../src/queue/appendCommand.ts';
import { handDrainSuite } from './support/handDrain.ts';

// The collector's sample of use, which the web UI's charts draw: each pass
// counts what happened since the one before, with the drain run by hand so
// the test knows exactly what happened.
const alice = { issuedBy: 'alice@host', source: 'cli' } as const;
const { db, hand } = handDrainSuite();
let pool: number;
let other: number;

beforeAll(async () => {
  pool = (await createBlueprint(db(), { name: 'pool', driver: 'simulated', maxResources: 1, leasesPerResource: 2 }, alice)).id;
  other = (await createBlueprint(db(), { name: 'other', driver: 'simulated', maxResources: 1, leasesPerResource: 1 }, alice)).id;
});

const usage = async (passId: number) => db().selectFrom('usage_samples').selectAll().where('pass_id', '=', passId).executeTakeFirstOrThrow();
const blueprintUsage = async (passId: number, blueprintId: number) =>
  db()
    .selectFrom('blueprint_usage_samples')
    .selectAll()
    .where('pass_id', '=', passId)
    .where('blueprint_id', '=', blueprintId)
    .executeTakeFirstOrThrow();
const lease = (blueprint: string) => createLease(db(), { blueprint, holder: 'alice' }, alice);
const release = (id: number) => appendCommand(db(), { target: { kind: 'lease', id }, kind: 'release', actor: alice });

test('a first sample sets its marks and counts what is live; later samples count what happened since the one before', async () => {
  const first = await hand.pass();
  expect(first.status).toBe('done');
  expect(first.steps.sampleUsage).toEqual({ found: 2, actions: [], truncated: false });
  expect(await usage(first.id)).toMatchObject({ commands_appended: null, commands_failed: null, leases_activated: null, wait_p50_ms: null });
  expect(await blueprintUsage(first.id, pool)).toMatchObject({ leases: {}, leases_waiting: 0, resources: {}, leases_activated: null });

  // Three leases on two slots: two become active, one waits in line.
  const leases = [await lease('pool'), await lease('pool'), await lease('pool')];
  await hand.all();
  const second = await hand.pass();
  const appended = await sql<{
    n: number;
  }>`select count(*)::int as n from commands where id > (select last_command_id from usage_samples where pass_id = ${first.id})`.execute(db());
  expect(await usage(second.id)).toMatchObject({ commands_appended: appended.rows[0]!.n, commands_failed: 0, leases_activated: 2 });
  const poolUse = await blueprintUsage(second.id, pool);
  expect(poolUse).toMatchObject({ leases: { active: 2, pending: 1 }, leases_waiting: 1, resources: { active: 1 }, leases_activated: 2 });
  expect(poolUse.wait_p50_ms).toBeGreaterThanOrEqual(0);
  expect(poolUse.wait_p95_ms).toBeGreaterThanOrEqual(poolUse.wait_p50_ms!);
  expect(await blueprintUsage(second.id, other)).toMatchObject({ leases: {}, leases_activated: 0, wait_p50_ms: null });

  // A release hands the slot to the lease in line: one more activation, none waiting.
  await release(leases[0]!.lease.id);
  await hand.all();
  const third = await hand.pass();
  expect(await usage(third.id)).toMatchObject({ leases_activated: 1 });
  expect(await blueprintUsage(third.id, pool)).toMatchObject({ leases: { active: 2 }, leases_waiting: 0, leases_activated: 1 });
  expect((await usage(third.id)).commands_appended).toBeGreaterThan(0);
});

test('failed commands are counted in the sample after they fail, once', async () => {
  const before = await hand.pass();
  // A lease whose driver fails for good: its acquisition fails.
  const failing = (
    await createBlueprint(
      db(),
      { name: 'failing', driver: 'simulated', settings: { permanentFailureRate: 1 }, maxResources: 1, leasesPerResource: 1 },
      alice,
    )
  ).id;
  await lease('failing');
  await hand.all();
  const failed = await sql<{ n: number }>`select count(*)::int as n from commands where status = 'failed'
    and finished_at > (select sampled_at from usage_samples where pass_id = ${before.id})`.execute(db());
  expect(failed.rows[0]!.n).toBeGreaterThan(0);
  const after = await hand.pass();
  expect(await usage(after.id)).toMatchObject({ commands_failed: failed.rows[0]!.n });
  expect((await hand.pass()).id).toBeGreaterThan(after.id);
  const next = await db().selectFrom('usage_samples').select('commands_failed').orderBy('pass_id', 'desc').limit(1).executeTakeFirstOrThrow();
  expect(next.commands_failed).toBe(0);
  expect(await blueprintUsage(after.id, failing)).toMatchObject({ leases_activated: 0 });
});

test('samples go with their passes when the collector prunes old passes', async () => {
  const pass = await hand.pass();
  await db().deleteFrom('gc_passes').where('id', '=', pass.id).execute();
  expect(await db().selectFrom('usage_samples').select('pass_id').where('pass_id', '=', pass.id).execute()).toEqual([]);
  expect(await db().selectFrom('blueprint_usage_samples').select('pass_id').where('pass_id', '=', pass.id).execute()).toEqual([]);
});
