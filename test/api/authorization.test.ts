import { sql } from 'kysely';
import { expect, test } from 'vitest';
import type { TokenRole } from '../../migrations/schema.ts';
import { ROLES } from '../../src/api/auth/roles.ts';
import { createToken, revokeToken } from '../../src/api/auth/tokens.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * The roles table, request by request: each role is allowed exactly where
 * it should be and refused (403) everywhere else, and a refused request,
 * like an unauthenticated one (401), writes nothing at all. Allowed requests
 * that queue work wait for it (?wait), so nothing still runs when the next
 * role's request is counted.
 */
const env = apiTestEnv({ worker: true });

interface Request {
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: string;
  readonly body?: unknown;
}

interface Case {
  readonly what: string;
  readonly allowed: readonly TokenRole[];
  /** Makes what the request needs (fresh for each role) and returns the request. */
  readonly setup: (caller: TokenRole) => Promise<Request>;
}

let blueprint: { id: number; name: string };
const shared = async () => (blueprint ??= await simulatedBlueprint(env.as.admin, {}, { maxResources: 50, leasesPerResource: 10 }));

const CASES: readonly Case[] = [
  { what: 'list leases', allowed: ROLES, setup: async () => ({ method: 'GET', path: '/v1/leases' }) },
  { what: 'list teams', allowed: ROLES, setup: async () => ({ method: 'GET', path: '/v1/teams' }) },
  { what: 'show a command', allowed: ROLES, setup: async () => ({ method: 'GET', path: '/v1/commands?limit=1' }) },
  {
    what: 'create a lease',
    allowed: ['user', 'operator', 'admin'],
    setup: async () => ({ method: 'POST', path: '/v1/leases?wait=60', body: { blueprint: (await shared()).name } }),
  },
  {
    what: "release a lease of one's own",
    allowed: ['user', 'operator', 'admin'],
    setup: async (caller) => {
      // The lease is held by the caller's own token (a viewer's is made by the operator: it cannot create any).
      const holder = caller === 'viewer' ? env.as.operator : env.as[caller];
      const lease = await activeLease(holder, (await shared()).name);
      return { method: 'POST', path: `/v1/leases/${lease.id}/commands?wait=60`, body: { kind: 'release' } };
    },
  },
  {
    what: "release somebody else's lease",
    allowed: ['operator', 'admin'],
    setup: async (caller) => {
      const owner = caller === 'operator' ? env.as.admin : env.as.operator;
      const lease = await activeLease(owner, (await shared()).name);
      return { method: 'POST', path: `/v1/leases/${lease.id}/commands?wait=60`, body: { kind: 'release' } };
    },
  },
  {
    what: "renew a lease of one's own",
    allowed: ['user', 'operator', 'admin'],
    setup: async (caller) => {
      const holder = caller === 'viewer' ? env.as.operator : env.as[caller];
      const lease = await activeLease(holder, (await shared()).name);
      return { method: 'POST', path: `/v1/leases/${lease.id}/commands?wait=60`, body: { kind: 'renew', payload: { expiresInMs: 3_600_000 } } };
    },
  },
  {
    what: "renew somebody else's lease",
    allowed: ['operator', 'admin'],
    setup: async (caller) => {
      const owner = caller === 'operator' ? env.as.admin : env.as.operator;
      const lease = await activeLease(owner, (await shared()).name);
      return { method: 'POST', path: `/v1/leases/${lease.id}/commands?wait=60`, body: { kind: 'renew', payload: { expiresInMs: 3_600_000 } } };
    },
  },
  {
    what: 'reclaim a resource',
    allowed: ['operator', 'admin'],
    setup: async () => {
      const own = await simulatedBlueprint(env.as.admin);
      const lease = await activeLease(env.as.operator, own.name);
      const shown = await env.as.viewer.get(`/v1/leases/${lease.id}`);
      return { method: 'POST', path: `/v1/resources/${shown.body.lease.resourceId}/commands?wait=60`, body: { kind: 'reclaim' } };
    },
  },
  {
    what: "cancel somebody else's queued command",
    allowed: ['operator', 'admin'],
    setup: async () => ({ method: 'POST', path: `/v1/commands/${await queuedReleaseByAdmin()}/cancel` }),
  },
  {
    what: 'create a blueprint',
    allowed: ['admin'],
    setup: async () => ({
      method: 'POST',
      path: '/v1/blueprints',
      body: { name: `bp-${Math.random().toString(36).slice(2, 8)}`, driver: 'simulated', maxResources: 1 },
    }),
  },
  {
    what: "change a blueprint's limits",
    allowed: ['admin'],
    setup: async () => ({ method: 'PATCH', path: `/v1/blueprints/${(await shared()).name}`, body: { maxResources: 60 } }),
  },
  {
    what: 'make a team',
    allowed: ['admin'],
    setup: async () => ({ method: 'POST', path: `/v1/teams/t-${Math.random().toString(36).slice(2, 8)}`, body: { weight: 2 } }),
  },
  {
    what: 'set a quota',
    allowed: ['admin'],
    setup: async () => ({ method: 'POST', path: '/v1/teams/default/quotas', body: { holder: 'token:nobody', maxLeases: 5 } }),
  },
  {
    what: 'disable a blueprint',
    allowed: ['admin'],
    setup: async () => ({ method: 'POST', path: `/v1/blueprints/${(await simulatedBlueprint(env.as.admin)).name}/disable` }),
  },
];

/**
 * A release queued by the admin token and left queued: made while the
 * worker is stopped (it stays stopped for the request; the test restarts it).
 */
async function queuedReleaseByAdmin(): Promise<number> {
  await env.startWorker();
  const lease = await activeLease(env.as.admin, (await shared()).name);
  await env.stopWorker();
  const release = await env.as.admin.post(`/v1/leases/${lease.id}/commands`, { kind: 'release' });
  expect(release.body.command.status).toBe('queued');
  return release.body.command.id;
}

async function everyRowCount(): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from blueprints)::int as blueprints, (select count(*) from leases)::int as leases,
           (select count(*) from resources)::int as resources, (select count(*) from commands)::int as commands,
           (select count(*) from events)::int as events, (select count(*) from idempotency_keys)::int as keys,
           (select count(*) from api_tokens)::int as tokens, (select count(*) from team_events)::int as team_changes,
           (select coalesce(max(version), 0) from blueprints)::int as blueprint_versions
  `.execute(env.database.db);
  return rows[0]!;
}

for (const { what, allowed, setup } of CASES) {
  test(`${what}: allowed for ${allowed.join(', ')}; refused with nothing written for the others`, async () => {
    for (const role of ROLES) {
      const request = await setup(role);
      const before = await everyRowCount();
      const answer = await env.as[role].call(request.method, request.path, { body: request.body ?? (request.method === 'GET' ? undefined : {}) });
      if (allowed.includes(role)) {
        expect(answer.status, `${role}: ${JSON.stringify(answer.body)}`).toBeLessThan(300);
      } else {
        expect(answer.status, `${role}: ${JSON.stringify(answer.body)}`).toBe(403);
        expect(answer.body.code).toBe('forbidden');
        expect(await everyRowCount()).toEqual(before);
      }
    }
    await env.startWorker();
  });
}

test('no token, an unknown token and a revoked token get 401, and write nothing', async () => {
  const { name } = await shared();
  const { secret } = await createToken(env.database.db, { name: 'short-lived', role: 'admin' }, 'test');
  expect((await env.as.user.withToken(secret).get('/v1/leases')).status).toBe(200);
  await revokeToken(env.database.db, 'short-lived');
  // A server trusts a valid token for a few seconds: the revocation shows within that.
  await waitFor('the revocation to take effect', async () => (await env.as.user.withToken(secret).get('/v1/leases')).status === 401, 15_000);
  const before = await everyRowCount();
  for (const client of [env.anonymous, env.as.user.withToken('slw_not-a-real-token'), env.as.user.withToken(secret)]) {
    const answer = await client.post('/v1/leases', { blueprint: name });
    expect(answer.status).toBe(401);
    expect(answer.body.code).toBe('unauthorized');
  }
  expect(await everyRowCount()).toEqual(before);
});
