import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';
import type { CallOptions } from './support/ApiClient.ts';

/**
 * Bad input, as a table: each request is answered with a clear 4xx naming
 * what was wrong, and nothing is written.
 */
const env = apiTestEnv({ worker: true, env: { SLIPWAY_API_BODY_LIMIT_BYTES: '4096' } });

interface BadRequest {
  readonly what: string;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: (ids: Fixture) => string;
  readonly options?: (ids: Fixture) => CallOptions;
  readonly status: number;
  readonly code: string;
  /** Matches the message, or the field named in details. */
  readonly says: RegExp;
}

interface Fixture {
  readonly lease: number;
  readonly blueprint: string;
}

const json = (body: unknown): CallOptions => ({ body });

const BAD: readonly BadRequest[] = [
  { what: 'body that is not JSON', method: 'POST', path: () => '/v1/leases', options: () => ({ rawBody: '{"blueprint": ' }), status: 400, code: 'invalid_json', says: /JSON/ },
  { what: 'a JSON array for a body', method: 'POST', path: () => '/v1/leases', options: () => ({ rawBody: '[1,2]' }), status: 400, code: 'invalid_input', says: /body: /},
  { what: 'a body of another media type', method: 'POST', path: () => '/v1/leases', options: () => ({ rawBody: 'blueprint=x', contentType: 'application/x-www-form-urlencoded' }), status: 415, code: 'unsupported_media_type', says: /application\/x-www-form-urlencoded/ },
  { what: 'an oversized body', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, attributes: { big: 'x'.repeat(5000) } }), status: 413, code: 'payload_too_large', says: /too large/i },
  { what: 'a missing field', method: 'POST', path: () => '/v1/leases', options: () => json({}), status: 400, code: 'invalid_input', says: /body\.blueprint/ },
  { what: 'a field of the wrong type', method: 'POST', path: () => '/v1/leases', options: () => json({ blueprint: true }), status: 400, code: 'invalid_input', says: /body\.blueprint/ },
  { what: 'an unknown field', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, holder: 'someone-else' }), status: 400, code: 'invalid_input', says: /body: Unrecognized key: "holder"/ },
  { what: 'an expiry time that is not a time', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresAt: 'tomorrow' }), status: 400, code: 'invalid_input', says: /body\.expiresAt: expected an ISO 8601 time/ },
  { what: 'an expiry time without its offset', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresAt: '2030-01-01T00:00:00' }), status: 400, code: 'invalid_input', says: /body\.expiresAt/ },
  { what: 'an expiry time as a number', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresAt: 1893456000000 }), status: 400, code: 'invalid_input', says: /body\.expiresAt/ },
  { what: 'an expiry time in the past', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresAt: '2001-01-01T00:00:00Z' }), status: 400, code: 'invalid_input', says: /body\.expiresAt: must be in the future/ },
  { what: 'both an expiry time and a term', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresAt: '2099-01-01T00:00:00Z', expiresInMs: 60_000 }), status: 400, code: 'invalid_input', says: /body\.expiresInMs: give expiresAt or expiresInMs, not both/ },
  { what: 'a term under a second', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, expiresInMs: 10 }), status: 400, code: 'invalid_input', says: /body\.expiresInMs: expected at least 1 s/ },
  { what: 'a heartbeat as text', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, heartbeatMs: '30s' }), status: 400, code: 'invalid_input', says: /body\.heartbeatMs/ },
  { what: 'a heartbeat longer than a day', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, heartbeatMs: 2 * 24 * 3600 * 1000 }), status: 400, code: 'invalid_input', says: /body\.heartbeatMs/ },
  { what: 'a callback on lease create', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, callback: { url: 'http://127.0.0.1:9/x' } }), status: 400, code: 'invalid_input', says: /body: Unrecognized key: "callback"/ },
  { what: 'a renewal with a negative term', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'renew', payload: { expiresInMs: -5 } }), status: 400, code: 'invalid_input', says: /payload\.expiresInMs/ },
  { what: 'a callback to a host not allowed', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', callback: { url: 'http://169.254.169.254/latest' } }), status: 400, code: 'invalid_input', says: /body\.callback\.url/ },
  { what: 'a callback that is not a URL', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', callback: { url: 'somewhere' } }), status: 400, code: 'invalid_input', says: /body\.callback\.url/ },
  { what: 'a callback with an unknown field', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', callback: { url: 'http://127.0.0.1:9/x', secret: 'x' } }), status: 400, code: 'invalid_input', says: /body\.callback: Unrecognized key: "secret"/ },
  { what: 'attributes that are not an object', method: 'POST', path: () => '/v1/leases', options: (f) => json({ blueprint: f.blueprint, attributes: [1] }), status: 400, code: 'invalid_input', says: /body\.attributes/ },
  { what: 'an unknown blueprint', method: 'POST', path: () => '/v1/leases', options: () => json({ blueprint: 'no-such-pool' }), status: 404, code: 'not_found', says: /blueprint no-such-pool does not exist/ },
  { what: 'an unknown command kind', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'explode' }), status: 400, code: 'invalid_input', says: /body\.kind/ },
  { what: 'an internal command kind', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'destroy' }), status: 400, code: 'invalid_input', says: /body\.kind/ },
  { what: 'a payload the kind does not take', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', payload: { force: true } }), status: 400, code: 'invalid_input', says: /payload/ },
  { what: 'a version nobody handles', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', version: 9 }), status: 400, code: 'invalid_input', says: /no version 9/ },
  { what: 'a reason too long', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands`, options: () => json({ kind: 'release', reason: 'r'.repeat(1001) }), status: 400, code: 'invalid_input', says: /body\.reason/ },
  { what: 'a wait too long', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands?wait=61`, options: () => json({ kind: 'release' }), status: 400, code: 'invalid_input', says: /query\.wait/ },
  { what: 'a wait that is not a number', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands?wait=soon`, options: () => json({ kind: 'release' }), status: 400, code: 'invalid_input', says: /query\.wait/ },
  { what: 'an unknown query parameter', method: 'POST', path: (f) => `/v1/leases/${f.lease}/commands?force=1`, options: () => json({ kind: 'release' }), status: 400, code: 'invalid_input', says: /query: Unrecognized key: "force"/ },
  { what: 'an id that is not a number', method: 'POST', path: () => '/v1/leases/abc/commands', options: () => json({ kind: 'release' }), status: 400, code: 'invalid_input', says: /params\.id/ },
  { what: 'an id of zero', method: 'GET', path: () => '/v1/leases/0', status: 400, code: 'invalid_input', says: /params\.id/ },
  { what: 'a negative id', method: 'GET', path: () => '/v1/commands/-4', status: 400, code: 'invalid_input', says: /params\.id/ },
  { what: 'an id far too large', method: 'GET', path: () => '/v1/resources/99999999999999999999', status: 400, code: 'invalid_input', says: /params\.id/ },
  { what: 'an unknown lease', method: 'GET', path: () => '/v1/leases/424242', status: 404, code: 'not_found', says: /lease 424242 does not exist/ },
  { what: 'a cursor that is not an id', method: 'GET', path: () => '/v1/leases?after=abc', status: 400, code: 'invalid_input', says: /query\.after/ },
  { what: 'a cursor of zero', method: 'GET', path: () => '/v1/commands?after=0', status: 400, code: 'invalid_input', says: /query\.after/ },
  { what: 'a page too large', method: 'GET', path: () => '/v1/resources?limit=100000', status: 400, code: 'invalid_input', says: /query\.limit/ },
  { what: 'a state that does not exist', method: 'GET', path: () => '/v1/leases?state=sleeping', status: 400, code: 'invalid_input', says: /query\.state/ },
  { what: 'a target filter of the wrong form', method: 'GET', path: () => '/v1/commands?target=lease-4', status: 400, code: 'invalid_input', says: /query\.target/ },
  { what: 'a blueprint filter naming nothing', method: 'GET', path: () => '/v1/leases?blueprint=nothing-here', status: 404, code: 'not_found', says: /blueprint nothing-here/ },
  { what: 'a blueprint with an invalid name', method: 'POST', path: () => '/v1/blueprints', options: () => json({ name: 'Bad Name', driver: 'simulated', maxResources: 1 }), status: 400, code: 'invalid_input', says: /body\.name/ },
  { what: 'a blueprint with bad driver settings', method: 'POST', path: () => '/v1/blueprints', options: () => json({ name: 'bad-settings', driver: 'simulated', maxResources: 1, settings: { latencyMs: 5 } }), status: 400, code: 'invalid_input', says: /settings/ },
  { what: 'a blueprint change naming nothing', method: 'PATCH', path: (f) => `/v1/blueprints/${f.blueprint}`, options: () => json({}), status: 400, code: 'invalid_input', says: /at least one/ },
  { what: 'a route that does not exist', method: 'GET', path: () => '/v1/leasez', status: 404, code: 'no_such_route', says: /no route GET \/v1\/leasez/ },
];

async function everyRowCount(): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from blueprints)::int as blueprints, (select count(*) from leases)::int as leases,
           (select count(*) from resources)::int as resources, (select count(*) from commands)::int as commands,
           (select count(*) from events)::int as events, (select count(*) from idempotency_keys)::int as keys,
           (select count(*) from command_callbacks)::int as callbacks,
           (select coalesce(sum(version), 0) from blueprints)::int as blueprint_versions
  `.execute(env.database.db);
  return rows[0]!;
}

test(`${BAD.length} kinds of bad request: each a clear 4xx naming the problem, with nothing written`, async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.admin, name);
  const fixture: Fixture = { lease: lease.id, blueprint: name };
  const before = await everyRowCount();
  for (const bad of BAD) {
    const answer = await env.as.admin.call(bad.method, bad.path(fixture), bad.options?.(fixture) ?? {});
    const said = `${bad.what}: ${answer.status} ${JSON.stringify(answer.body)}`;
    expect(answer.status, said).toBe(bad.status);
    expect(answer.body.code, said).toBe(bad.code);
    expect(`${answer.body.message} ${answer.body.details.field ?? ''}`, said).toMatch(bad.says);
    expect(answer.body.details.requestId, said).toBe(answer.headers.get('x-request-id'));
    expect(JSON.stringify(answer.body), said).not.toMatch(/\bat .*\.ts:\d+/);
  }
  expect(await everyRowCount()).toEqual(before);
});
