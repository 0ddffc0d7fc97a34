import { afterAll, beforeAll, expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { HttpJsonClient } from '../helpers/HttpJsonClient.ts';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { createLeases, shuffle, simulatedBlueprint, waitForLeases, waitForQuietQueues } from '../concurrency/support/fixtures.ts';
import { clusterForThisFile } from '../concurrency/support/testCluster.ts';

/**
 * The release race through the HTTP API: 20 callers, each with its own
 * token and keep-alive connections, send 200 releases of one lease at once
 * while worker processes drain with random delays. Exactly one release
 * effect may happen, and every caller must learn the same command id
 * (202 for the one that queued it, 200 for those that joined it, or 409
 * naming it once it had already done its work).
 */
const CLIENTS = 20;
const REQUESTS_PER_CLIENT = 10;
const ROUNDS = 3;

const cluster = clusterForThisFile({ workers: 2, poolSize: 40, env: { SLIPWAY_CHAOS_DRAIN_DELAY_MS: '20' } });
let server: ApiServer;
let clients: HttpJsonClient[];

beforeAll(async () => {
  const config = loadConfig({ DATABASE_URL: cluster.database.url, SLIPWAY_API_PORT: '0', LOG_LEVEL: 'warn' });
  server = await ApiServer.start(cluster.database, config, testLog);
  clients = await Promise.all(
    Array.from({ length: CLIENTS }, async (_, n) => {
      const { secret } = await createToken(cluster.database.db, { name: `caller-${n}`, role: 'operator' }, 'test');
      return new HttpJsonClient(server.url, secret, { connections: REQUESTS_PER_CLIENT });
    }),
  );
});
afterAll(async () => {
  for (const client of clients ?? []) client.close();
  await server?.stop();
});

interface ReleaseAnswer {
  command?: { id: number };
  coalesced?: boolean;
  code?: string;
  details?: { settledBy?: number | null };
}

test(`${CLIENTS} clients sending ${CLIENTS * REQUESTS_PER_CLIENT} concurrent releases of one lease release it once, and all learn the same command`, async () => {
  const db = cluster.database.db;
  const blueprint = await simulatedBlueprint(db, 'api-race', { maxResources: ROUNDS, leasesPerResource: 1 }, { latencyMs: { min: 0, max: 30 } });
  const leases = await createLeases(db, blueprint, ROUNDS);
  await waitForLeases(
    db,
    leases.map((l) => l.id),
    ['active'],
  );

  for (const lease of leases) {
    const requests = shuffle(clients.flatMap((client) => Array.from({ length: REQUESTS_PER_CLIENT }, () => client)));
    const answers = await Promise.all(
      requests.map((client) => client.request<ReleaseAnswer>('POST', `/v1/leases/${lease.id}/commands`, { kind: 'release', reason: 'race' })),
    );

    const unexpected = answers.filter((a) => ![200, 202, 409].includes(a.status));
    expect(unexpected, JSON.stringify(unexpected.slice(0, 3))).toEqual([]);
    const queuedIt = answers.filter((a) => a.status === 202);
    expect(queuedIt, `lease ${lease.id}: exactly one caller queued the release`).toHaveLength(1);
    const released = queuedIt[0]!.body.command!.id;
    for (const answer of answers.filter((a) => a.status === 200)) {
      expect(answer.body.coalesced).toBe(true);
      expect(answer.body.command!.id).toBe(released);
    }
    for (const answer of answers.filter((a) => a.status === 409)) expect(answer.body.details!.settledBy).toBe(released);
  }

  await waitForLeases(
    db,
    leases.map((l) => l.id),
    ['destroyed'],
  );
  await waitForQuietQueues(db);
  const effects = await db.selectFrom('simulated_effects').select(['object_id', 'idempotency_key']).where('operation', '=', 'releaseLease').execute();
  for (const lease of leases) {
    expect(
      effects.filter((e) => e.object_id === lease.id),
      `lease ${lease.id}: one release effect`,
    ).toHaveLength(1);
  }
  const releases = await db
    .selectFrom('commands')
    .select(['target_id', 'status'])
    .where('kind', '=', 'release')
    .where('target_kind', '=', 'lease')
    .where('status', 'not in', ['coalesced'])
    .execute();
  expect(releases.map((r) => r.status)).toEqual(leases.map(() => 'done'));
});
