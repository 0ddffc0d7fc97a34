import { sql } from 'kysely';
import { afterEach, expect, test } from 'vitest';
import { COMMANDS_CHANNEL } from '../../src/db/channels.ts';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { operatorLease } from './support/webFixtures.ts';
import { WebClient } from './support/WebClient.ts';

const env = apiTestEnv({ worker: true, env: { SLIPWAY_WEB_HEARTBEAT_MS: '200' } });
const streams: AbortController[] = [];
afterEach(() => {
  for (const stream of streams.splice(0)) stream.abort();
});

/** Opens /events with a signed-in client's cookies; collects the raw text as it arrives. */
async function openStream(client: WebClient, baseUrl = env.server.url) {
  const controller = new AbortController();
  streams.push(controller);
  const response = await fetch(`${baseUrl}/events`, {
    headers: { accept: 'text/event-stream', cookie: client.cookieHeader() },
    signal: controller.signal,
  });
  const received = { text: '', ended: false };
  const reading = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body!) received.text += decoder.decode(chunk as Uint8Array, { stream: true });
    } catch {
      // aborted by the test
    }
    received.ended = true;
  })();
  return { response, received, reading };
}

function changedEvents(text: string): string[][] {
  return [...text.matchAll(/event: changed\ndata: (.*)\n\n/g)].map((m) => JSON.parse(m[1]!) as string[]);
}

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function signedIn(): Promise<WebClient> {
  const client = new WebClient(env.server.url);
  await client.signIn(env.as.viewer.token!);
  return client;
}

test('the stream needs a session', async () => {
  const response = await fetch(`${env.server.url}/events`, { headers: { accept: 'text/event-stream' } });
  expect(response.status).toBe(401);
});

test('a release shows up as changes of the lease and its commands; quiet times carry heartbeats', async () => {
  const lease = await operatorLease(env);
  const { response, received } = await openStream(await signedIn());
  expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  await until('the lease destroyed', () => changedEvents(received.text).flat().includes(`lease:${lease.id}`));
  await until('a heartbeat', () => received.text.includes(': heartbeat\n\n'));
});

test('a burst of notices reaches a page as one coalesced message', async () => {
  const { received } = await openStream(await signedIn());
  await until('the stream open', () => received.text.includes(': connected'));
  await env.database.db.transaction().execute(async (trx) => {
    for (let i = 1; i <= 200; i++) {
      const notice = JSON.stringify({ id: 100_000 + i, target: `lease:${(i % 5) + 1}`, status: 'done' });
      await sql`select pg_notify(${COMMANDS_CHANNEL}, ${notice})`.execute(trx);
    }
  });
  await until('the burst', () => changedEvents(received.text).some((changes) => changes.includes('command:100200')));
  await new Promise((resolve) => setTimeout(resolve, 400));
  const burst = changedEvents(received.text).filter((changes) => changes.some((c) => /^command:100\d{3}$/.test(c)));
  expect(burst).toHaveLength(1);
  expect(burst[0]!.filter((c) => c.startsWith('lease:')).sort()).toEqual(['lease:1', 'lease:2', 'lease:3', 'lease:4', 'lease:5']);
});

test('a stopping server ends its streams instead of waiting for them', async () => {
  // A server of this test's own (the file's servers are stopped once, after the file).
  const server = await ApiServer.start(
    env.database,
    loadConfig({ DATABASE_URL: env.database.url, SLIPWAY_API_PORT: '0', LOG_LEVEL: 'warn' }),
    testLog,
  );
  const client = new WebClient(server.url);
  await client.signIn(env.as.viewer.token!);
  const { received, reading } = await openStream(client, server.url);
  await until('the stream open', () => received.text.includes(': connected'));
  const started = Date.now();
  await server.stop();
  await reading;
  expect(received.ended).toBe(true);
  // Not held open for the streams' lifetime (they would never end by themselves).
  expect(Date.now() - started).toBeLessThan(20_000);
});

test('a cut LISTEN connection is made again: the stream stays open, tells pages to look again, and carries changes again', async () => {
  const lease = await operatorLease(env);
  const { received } = await openStream(await signedIn());
  await until('the stream open', () => received.text.includes(': connected'));
  // Every server of this database listens on a backend whose last statement was its LISTENs.
  const { rows } = await sql<{ cut: boolean }>`
    select pg_terminate_backend(pid) as cut from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and query like ${`%listen ${COMMANDS_CHANNEL}%`}
  `.execute(env.database.db);
  expect(rows.length).toBeGreaterThan(0);
  await until('the page told to look again', () => changedEvents(received.text).some((changes) => changes.includes('*resync')));
  expect(received.ended).toBe(false);
  expect((await env.anonymous.get('/readyz')).status).toBe(200);
  await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  await until('the release heard on the new connection', () => changedEvents(received.text).flat().includes(`lease:${lease.id}`));
});
