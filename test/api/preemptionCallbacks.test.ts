import { afterAll, beforeAll, expect, test } from 'vitest';
import { verifyCallbackSignature } from '../../src/callbacks/signCallback.ts';
import { CallbackReceiver } from '../callbacks/support/CallbackReceiver.ts';
import { TEST_SECRET } from '../callbacks/support/callbackFixtures.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, preemptingSlot, waitingLease } from './support/fixtures.ts';

/**
 * A preempted lease's holder callback (docs/callbacks.md, "The holder's
 * callback"), with a real worker and a real receiver: told of the
 * preemption at once (the `ending`), then of its end at the grace period's
 * end; told of a withdrawal (what was withdrawn) when the lease it was for
 * goes away.
 */
const env = apiTestEnv({ worker: true, env: { ...NO_SCHEDULED_COLLECTOR, SLIPWAY_CALLBACK_SECRET: TEST_SECRET } });

let receiver: CallbackReceiver;
beforeAll(async () => {
  receiver = await CallbackReceiver.start();
});
afterAll(async () => {
  await receiver?.close();
});

/** An active lease whose holder's callback goes to `path`. */
const heldWithCallback = (blueprint: string, path: string) =>
  activeLease(env.as.user, blueprint, { priority: 1, callback: { url: receiver.url(path) } });

/** The first `n` callbacks at `path`, signed, as their bodies. */
function received(path: string, n: number) {
  return waitFor(`${n} callback(s) at ${path}`, async () => {
    const got = receiver.received(path);
    if (got.length < n) return undefined;
    for (const request of got) {
      const signature = verifyCallbackSignature({ header: request.headers['slipway-signature'] as string, body: request.body, secret: TEST_SECRET });
      expect(signature.ok).toBe(true);
    }
    return got.map((request) => JSON.parse(request.body));
  });
}

test("a preempted lease's holder is told at once, with the ending, and again when its grace period ends it", async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 1500 });
  const victim = await heldWithCallback(name, '/preempted');
  const urgent = await waitingLease(env.as.admin, name, { priority: 5 });

  const [notice, end] = await received('/preempted', 2);
  expect(notice).toMatchObject({
    outcome: 'succeeded',
    command: { kind: 'notify_ending', targetKind: 'lease', targetId: victim.id, status: 'done' },
    ending: { kind: 'preempted' },
  });
  expect(notice.ending.reason).toMatch(new RegExp(`^preempted for lease ${urgent.id}: priority 5 against 1`));
  expect(notice.command.message).toBe(`ending by ${notice.ending.at.replace('T', ' ')}: ${notice.ending.reason}`);
  expect(notice.withdrawn).toBeUndefined();
  expect(end).toMatchObject({
    command: { kind: 'release', targetId: victim.id, issuedBy: 'system:preemption', reason: notice.ending.reason, message: 'released and destroyed' },
  });
  expect(end.ending).toBeUndefined();
  await waitFor('the urgent lease to be active', async () => (await env.as.admin.get(`/v1/leases/${urgent.id}`)).body.lease.state === 'active');
  expect((await env.as.admin.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test("a withdrawn preemption's holder is told what was withdrawn: the end it had been told of, and why", async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  const victim = await heldWithCallback(name, '/withdrawn');
  const urgent = await waitingLease(env.as.admin, name, { priority: 5 });
  const [notice] = await received('/withdrawn', 1);
  expect(notice.ending.kind).toBe('preempted');

  expect((await env.as.admin.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  const [, withdrawal] = await received('/withdrawn', 2);
  const reason = `the preemption is withdrawn: lease ${urgent.id}, which it was for, no longer waits`;
  expect(withdrawal).toMatchObject({
    outcome: 'succeeded',
    command: { kind: 'withdraw_ending', targetKind: 'lease', targetId: victim.id, status: 'done' },
    withdrawn: { kind: 'preempted', at: notice.ending.at, reason },
  });
  expect(withdrawal.command.message).toBe(`no longer ending by ${notice.ending.at.replace('T', ' ')}: ${reason}`);
  expect(withdrawal.ending).toBeUndefined();
  const kept = (await env.as.user.get(`/v1/leases/${victim.id}`)).body.lease;
  expect(kept).toMatchObject({ state: 'active', ending: null });
  expect((await env.as.user.post(`/v1/leases/${victim.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});
