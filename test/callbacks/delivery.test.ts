import { afterAll, beforeAll, expect, test } from 'vitest';
import { verifyCallbackSignature } from '../../src/callbacks/signCallback.ts';
import { loadConfig } from '../../src/config.ts';
import { readCommandTree } from '../../src/read/commandTree.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { parseJson, runCli } from '../cli/runCli.ts';
import { createLeases, releaseLease, simulatedBlueprint, waitForLeases, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { attachLater, deliveryJobs, releaseWithCallback, TEST_SECRET, waitForCallback } from './support/callbackFixtures.ts';
import { CallbackReceiver, type ReceivedCallback } from './support/CallbackReceiver.ts';

/** A real worker (graphile-worker, in this process) delivering to a real HTTP receiver on a free port. */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let worker: SlipwayWorker | undefined;
let receiver: CallbackReceiver;
let nextLease: () => Promise<number>;

const MAX_ATTEMPTS = 3;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 12 });
  receiver = await CallbackReceiver.start();
  const config = loadConfig({
    DATABASE_URL: database.url,
    SLIPWAY_WORKER_CONCURRENCY: '4',
    SLIPWAY_CALLBACK_SECRET: TEST_SECRET,
    SLIPWAY_CALLBACK_BACKOFF_MS: '300',
    SLIPWAY_CALLBACK_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
  });
  worker = await SlipwayWorker.start(database, config, testLog);
  // A slot a resource: each release gives back its resource's last slot, which the resource then counts.
  const blueprint = await simulatedBlueprint(database.db, 'hooks', { maxResources: 4, leasesPerResource: 1 });
  nextLease = async () => {
    const [lease] = await createLeases(database.db, blueprint, 1);
    await waitForLeases(database.db, [lease!.id], ['active']);
    return lease!.id;
  };
});
afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await database?.drop();
});

function verify(request: ReceivedCallback) {
  return verifyCallbackSignature({ header: request.headers['slipway-signature'] as string, body: request.body, secret: TEST_SECRET });
}

test('a release with a callback is delivered once, signed, after the release and everything it caused have settled', async () => {
  const db = database.db;
  const leaseId = await nextLease();
  const { command, callback } = await releaseWithCallback(db, leaseId, receiver.url('/once'));
  expect(callback.status).toBe('waiting');

  const delivered = await waitForCallback(db, command.id, ['delivered', 'failed']);
  expect(delivered).toMatchObject({ status: 'delivered', attempts: 1, next_attempt_at: null });
  expect(delivered.attempt_log).toMatchObject([{ attempt: 1, status_code: 204, error: null, next_retry_at: null }]);

  const [request, ...more] = receiver.received('/once');
  expect(more).toEqual([]);
  expect(verify(request!).ok).toBe(true);
  expect(
    verifyCallbackSignature({ header: request!.headers['slipway-signature'] as string, body: request!.body, secret: `${TEST_SECRET}x` }).ok,
  ).toBe(false);
  expect(request!.headers).toMatchObject({
    'content-type': 'application/json',
    'slipway-delivery': String(callback.id),
    'slipway-attempt': '1',
  });

  // The body is the whole settled tree: release (which destroys the lease) → count_slots, nothing left running.
  const body = JSON.parse(request!.body);
  expect(body).toMatchObject({
    event: 'command.settled',
    delivery: callback.id,
    outcome: 'succeeded',
    command: { id: command.id, kind: 'release', targetKind: 'lease', targetId: leaseId, status: 'done', issuedBy: 'tester' },
    treeTruncated: false,
  });
  const finalTree = await readCommandTree(db, command.id);
  expect(body.tree.map((n: { id: number; status: string }) => [n.id, n.status])).toEqual(finalTree.map((n) => [n.id, n.status]));
  expect(body.tree.map((n: { kind: string }) => n.kind)).toEqual(['release', 'count_slots']);

  // Still once after every queue (and every delivery job) has emptied.
  await waitForQuietQueues(db);
  await waitFor('no delivery job left', async () => (await deliveryJobs(db)) === 0);
  expect(receiver.received('/once')).toHaveLength(1);
});

test('a receiver that fails twice gets the callback a third time, after a backoff each time, and every attempt shows on the command', async () => {
  const db = database.db;
  receiver.script('/flaky', [{ status: 500 }, { status: 503 }]);
  const leaseId = await nextLease();
  const { command } = await releaseWithCallback(db, leaseId, receiver.url('/flaky'));

  const delivered = await waitForCallback(db, command.id, ['delivered', 'failed']);
  expect(delivered).toMatchObject({ status: 'delivered', attempts: 3 });
  const [first, second, third] = delivered.attempt_log;
  expect(first).toMatchObject({ attempt: 1, status_code: 500, error: 'receiver answered 500 Internal Server Error' });
  expect(second).toMatchObject({ attempt: 2, status_code: 503, error: 'receiver answered 503 Service Unavailable' });
  expect(third).toMatchObject({ attempt: 3, status_code: 204, error: null, next_retry_at: null });
  // Each retry was due a backoff after the failure before it (doubling), and was not sent before it was due.
  expect(first!.next_retry_at!.getTime() - first!.finished_at.getTime()).toBeGreaterThanOrEqual(300 - 50);
  expect(second!.next_retry_at!.getTime() - second!.finished_at.getTime()).toBeGreaterThanOrEqual(600 - 50);
  const requests = receiver.received('/flaky');
  expect(requests.map((r) => r.headers['slipway-attempt'])).toEqual(['1', '2', '3']);
  expect(requests.map((r) => verify(r).ok)).toEqual([true, true, true]);
  expect(new Set(requests.map((r) => r.body)).size).toBe(1);
  expect(requests[1]!.at.getTime()).toBeGreaterThanOrEqual(first!.next_retry_at!.getTime() - 50);
  expect(requests[2]!.at.getTime()).toBeGreaterThanOrEqual(second!.next_retry_at!.getTime() - 50);

  // `slipway command show` shows the attempts, as text and as JSON.
  const json = parseJson(await runCli(['--json', 'command', 'show', String(command.id)], database.url));
  expect(json.callbacks).toMatchObject([
    { url: receiver.url('/flaky'), status: 'delivered', attempts: 3, attemptLog: [{ statusCode: 500 }, { statusCode: 503 }, { statusCode: 204 }] },
  ]);
  const text = await runCli(['command', 'show', String(command.id)], database.url);
  expect(text.code).toBe(0);
  const section = text.stdout.slice(text.stdout.indexOf('\ncallbacks\n'));
  expect(section).toMatch(new RegExp(`\\n {2}#\\d+ ${receiver.url('/flaky')}: delivered after 3 attempts\\n`));
  expect(section).toMatch(/\n {4}ATTEMPT +AT +STATUS +NEXT RETRY +ERROR\n/);
  expect(section).toMatch(/\n {4}1 +\S+ \S+ +500 +\S+ \S+ +receiver answered 500 Internal Server Error\n/);
  expect(section).toMatch(/\n {4}3 +\S+ \S+ +204 +-\n?$/);
});

test('a receiver that keeps failing is given up on after the last attempt', async () => {
  const db = database.db;
  receiver.script(
    '/down',
    Array.from({ length: MAX_ATTEMPTS + 1 }, () => ({ status: 500 })),
  );
  const { command } = await releaseWithCallback(db, await nextLease(), receiver.url('/down'));
  const failed = await waitForCallback(db, command.id, ['delivered', 'failed']);
  expect(failed).toMatchObject({ status: 'failed', attempts: MAX_ATTEMPTS, next_attempt_at: null });
  expect(failed.attempt_log.map((a) => [a.attempt, a.status_code, a.next_retry_at === null])).toEqual([
    [1, 500, false],
    [2, 500, false],
    [3, 500, true],
  ]);
  await waitFor('no delivery job left', async () => (await deliveryJobs(db)) === 0);
  expect(receiver.received('/down')).toHaveLength(MAX_ATTEMPTS);
});

test('a redirect is not followed: it counts as a failed attempt', async () => {
  const db = database.db;
  const elsewhere = receiver.url('/elsewhere');
  receiver.script(
    '/moved',
    Array.from({ length: MAX_ATTEMPTS }, () => ({ status: 307, location: elsewhere })),
  );
  const { command } = await releaseWithCallback(db, await nextLease(), receiver.url('/moved'));
  const failed = await waitForCallback(db, command.id, ['delivered', 'failed']);
  expect(failed.status).toBe('failed');
  expect(failed.attempt_log[0]).toMatchObject({ status_code: 307, error: `redirect to ${elsewhere} not followed` });
  expect(receiver.received('/elsewhere')).toEqual([]);
});

test('a receiver nobody listens on is an attempt with the network error', async () => {
  const db = database.db;
  const closed = await CallbackReceiver.start();
  const url = closed.url('/gone');
  await closed.close();
  const { command } = await releaseWithCallback(db, await nextLease(), url);
  const failed = await waitForCallback(db, command.id, ['delivered', 'failed']);
  expect(failed.attempt_log[0]).toMatchObject({ status_code: null, error: 'ECONNREFUSED' });
});

test('a callback registered after its command settled is delivered at once', async () => {
  const db = database.db;
  const leaseId = await nextLease();
  const { command } = await releaseLease(db, leaseId);
  await waitForLeases(db, [leaseId], ['destroyed']);
  await waitForQuietQueues(db);
  const callback = await attachLater(db, command.id, receiver.url('/late'));
  expect(callback.status).toBe('pending');
  await waitForCallback(db, command.id, ['delivered']);
  const [request] = receiver.received('/late');
  expect(JSON.parse(request!.body)).toMatchObject({ outcome: 'succeeded', command: { id: command.id, status: 'done' } });
});

test('a command that failed is reported with the outcome failed', async () => {
  const db = database.db;
  const breaking = await simulatedBlueprint(
    db,
    'breaks-on-release',
    { maxResources: 1, leasesPerResource: 1 },
    { permanentFailureRate: 1, failOperations: ['releaseLease'] },
  );
  const [lease] = await createLeases(db, breaking, 1);
  await waitForLeases(db, [lease!.id], ['active']);
  const { command } = await releaseWithCallback(db, lease!.id, receiver.url('/broken'));
  await waitForCallback(db, command.id, ['delivered']);
  const body = JSON.parse(receiver.received('/broken')[0]!.body);
  expect(body).toMatchObject({ outcome: 'failed', command: { id: command.id, status: 'failed' } });
  expect(body.command.message).toMatch(/^driver failed permanently/);
});
