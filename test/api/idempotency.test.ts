import { expect, test } from 'vitest';
import { pruneKeys } from '../../src/api/idempotency.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/** Idempotency-Key: replay, 422 on a different request, 409 while in progress, scoped per token, pruned. */
const env = apiTestEnv({ worker: true });

const key = () => `key-${Math.random().toString(36).slice(2)}`;

async function leaseCount(): Promise<number> {
  const row = await env.database.db
    .selectFrom('leases')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

test('the same key with the same request returns the first answer, and does the work once', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const headers = { 'idempotency-key': key() };
  const before = await leaseCount();
  const first = await env.as.user.post('/v1/leases', { blueprint: name, attributes: { a: 1, b: 2 } }, { headers });
  // The same body with its keys in another order is the same request.
  const second = await env.as.user.post('/v1/leases', { attributes: { b: 2, a: 1 }, blueprint: name }, { headers });
  expect(first.status).toBe(202);
  expect(second.status).toBe(202);
  expect(second.body).toEqual(first.body);
  expect(second.headers.get('location')).toBe(first.headers.get('location'));
  expect(second.headers.get('idempotent-replayed')).toBe('true');
  expect(first.headers.get('idempotent-replayed')).toBeNull();
  expect(await leaseCount()).toBe(before + 1);
});

test('the same key with a different body, path or query is refused with 422, and nothing is written', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const headers = { 'idempotency-key': key() };
  await env.as.user.post('/v1/leases', { blueprint: name }, { headers });
  const before = await leaseCount();
  for (const [path, body] of [
    ['/v1/leases', { blueprint: name, attributes: { x: 1 } }],
    ['/v1/leases?wait=1', { blueprint: name }],
  ] as const) {
    const reused = await env.as.user.post(path, body, { headers });
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe('idempotency_key_reused');
  }
  expect(await leaseCount()).toBe(before);
});

test('while the first request is still waiting, the same key replays its 202 at once; afterwards, the final answer', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { operationLatencyMs: { releaseLease: 3000 } });
  const lease = await activeLease(env.as.operator, name);
  const headers = { 'idempotency-key': key() };
  const path = `/v1/leases/${lease.id}/commands?wait=30`;
  const first = env.as.operator.post(path, { kind: 'release' }, { headers });
  // The first request has committed its command and key, and waits (the release takes 3 s).
  await waitFor('the first request to record its key', async () =>
    env.database.db.selectFrom('idempotency_keys').select('state').where('key', '=', headers['idempotency-key']).executeTakeFirst(),
  );
  const during = await env.as.operator.post(path, { kind: 'release' }, { headers });
  expect(during.status, JSON.stringify(during.body)).toBe(202);
  expect(during.headers.get('idempotent-replayed')).toBe('true');
  expect(during.headers.get('location')).toBe(`/v1/commands/${during.body.command.id}`);
  expect(during.body.command.kind).toBe('release');

  const answered = await first;
  expect(answered.status).toBe(200);
  expect(answered.body.outcome).toBe('settled');
  const after = await env.as.operator.post(path, { kind: 'release' }, { headers });
  expect(after.status).toBe(200);
  expect(after.body).toEqual(answered.body);
  expect(after.headers.get('idempotent-replayed')).toBe('true');
});

test('a failed request does not use up its key: a corrected retry with the same key goes through', async () => {
  const headers = { 'idempotency-key': key() };
  const missing = await env.as.user.post('/v1/leases', { blueprint: 'no-such-blueprint' }, { headers });
  expect(missing.status).toBe(404);
  const again = await env.as.user.post('/v1/leases', { blueprint: 'no-such-blueprint' }, { headers });
  expect(again.status).toBe(404);
  expect(await env.database.db.selectFrom('idempotency_keys').select('key').where('key', '=', headers['idempotency-key']).execute()).toEqual([]);
});

test('keys belong to their token: another token with the same key is another request', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const headers = { 'idempotency-key': key() };
  const before = await leaseCount();
  const mine = await env.as.user.post('/v1/leases', { blueprint: name }, { headers });
  const theirs = await env.as.operator.post('/v1/leases', { blueprint: name }, { headers });
  expect(theirs.body.lease.id).not.toBe(mine.body.lease.id);
  expect(await leaseCount()).toBe(before + 2);
});

test('a malformed key is a 400 naming the header', async () => {
  const answer = await env.as.user.post('/v1/leases', { blueprint: 'x' }, { headers: { 'idempotency-key': 'has spaces in it' } });
  expect(answer.status).toBe(400);
  expect(answer.body.details.field).toBe('headers.idempotency-key');
});

test('keys older than the retention are pruned, and then the key is fresh again', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const headers = { 'idempotency-key': key() };
  const first = await env.as.user.post('/v1/leases', { blueprint: name }, { headers });
  await env.database.db
    .updateTable('idempotency_keys')
    .set({ created_at: new Date(Date.now() - 25 * 3600 * 1000) })
    .where('key', '=', headers['idempotency-key'])
    .execute();
  // An expired key is reused as a fresh one even before the pruner runs...
  const second = await env.as.user.post('/v1/leases', { blueprint: name }, { headers });
  expect(second.status).toBe(202);
  expect(second.body.lease.id).not.toBe(first.body.lease.id);
  // ...and the pruner forgets expired keys.
  await env.database.db
    .updateTable('idempotency_keys')
    .set({ created_at: new Date(Date.now() - 25 * 3600 * 1000) })
    .where('key', '=', headers['idempotency-key'])
    .execute();
  expect(await pruneKeys(env.database.db, 24)).toBeGreaterThanOrEqual(1);
  expect(await env.database.db.selectFrom('idempotency_keys').select('key').where('key', '=', headers['idempotency-key']).execute()).toEqual([]);
});
