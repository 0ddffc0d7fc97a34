import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, expectTypeOf, test } from 'vitest';
import type { Lease } from '../../src/api/shapes.ts';
import { ApiRefusal, leaseAnswerOf, SlipwayClient, UnexpectedAnswer, Unreachable } from '../../src/client/index.ts';
import { closedPort } from '../helpers/deadEnds.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { simulatedBlueprint } from './support/fixtures.ts';

/**
 * The typed client against a real server: its answers are the operations'
 * types, parsed with their schemas; refusals, strangers and silence are
 * errors of their own. (The CLI's remote mode, test/cli/remote.test.ts,
 * uses it for everything else.)
 */
const env = apiTestEnv({ worker: true });
const client = (token = env.as.user.token!, baseUrl = env.server.url) => new SlipwayClient({ baseUrl, token });

test('a lease requested and read back comes typed, as the API describes it', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await client().call('createLease', { query: { wait: 30 }, body: { blueprint: name, attributes: { job: 'x' } } });
  expect(created.status).toBe(200);
  const answer = leaseAnswerOf(created.body);
  expect(answer.outcome).toBe('settled');
  const shown = await client().call('getLease', { params: { id: answer.lease.id } });
  expectTypeOf(shown.body.lease).toEqualTypeOf<Lease>();
  expect(shown.body.lease).toMatchObject({ state: 'active', holder: 'token:user', blueprintName: name, attributes: { job: 'x' } });
  const page = await client().call('listLeases', { query: { holder: 'token:user', order: 'newest', limit: 1 } });
  expect(page.body.items.map((l) => l.id)).toEqual([answer.lease.id]);
});

test('a refusal is an ApiRefusal with the API error body; a stranger and silence are errors of their own', async () => {
  const refused = await client(env.as.viewer.token!)
    .call('cancelCommand', { params: { id: 1 }, body: {} })
    .catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(ApiRefusal);
  expect(refused).toMatchObject({ status: 403, body: { code: 'forbidden' } });

  const stranger = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"hello":1}'));
  await new Promise<void>((resolve) => stranger.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(stranger.address() as AddressInfo).port}`;
    const odd = await client(undefined, url)
      .call('getLease', { params: { id: 1 } })
      .catch((e: unknown) => e);
    expect(odd).toBeInstanceOf(UnexpectedAnswer);
    expect((odd as Error).message).toMatch(/^GET \/v1\/leases\/1: the 200 answer is not what the API describes/);
  } finally {
    stranger.close();
  }

  const port = await closedPort();
  const silent = await client(undefined, `http://127.0.0.1:${port}`)
    .call('listCommands', {})
    .catch((e: unknown) => e);
  expect(silent).toBeInstanceOf(Unreachable);
  expect(silent).toMatchObject({ origin: `http://127.0.0.1:${port}`, reason: 'ECONNREFUSED' });
});
