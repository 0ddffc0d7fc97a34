import { beforeAll, expect, test } from 'vitest';
import { MAX_JSON_DEPTH } from '../src/domain/storableValue.ts';
import type { CallOptions } from './api/support/ApiClient.ts';
import { apiTestEnv } from './api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './api/support/fixtures.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from './cli/rowCounts.ts';
import { runCli } from './cli/runCli.ts';
import { WebClient } from './web/support/WebClient.ts';

/**
 * Bad input, as tables: every way in (an API request, a web page or form,
 * a command line) answered with a clear refusal naming what was wrong (a
 * 4xx, or one error line and a usage exit code), and nothing written: the
 * row count of every table is the same after.
 */
const BODY_LIMIT = 65_536;
const env = apiTestEnv({ worker: true, env: { SLIPWAY_API_BODY_LIMIT_BYTES: String(BODY_LIMIT), ...NO_SCHEDULED_COLLECTOR } });

/** What the rows refer to: an active lease on a simulated blueprint. */
interface Fixture {
  readonly lease: number;
  readonly blueprint: string;
}

let fixture: Fixture;
beforeAll(async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const lease = await activeLease(env.as.admin, name);
  fixture = { lease: lease.id, blueprint: name };
});

interface BadRequest {
  readonly what: string;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: (f: Fixture) => string;
  readonly options?: (f: Fixture) => CallOptions;
  readonly status: number;
  readonly code: string;
  /** Matches the message, or the field named in details. */
  readonly says: RegExp;
}

const json = (body: unknown): CallOptions => ({ body });

/** `{"a":{"a":...}}`, `levels` objects deep below the one it is put in. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let n = 1; n < levels; n++) value = { a: value };
  return value;
}

const BAD_REQUESTS: readonly BadRequest[] = [
  {
    what: 'body that is not JSON',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => ({ rawBody: '{"blueprint": ' }),
    status: 400,
    code: 'invalid_json',
    says: /JSON/,
  },
  {
    what: 'a JSON array for a body',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => ({ rawBody: '[1,2]' }),
    status: 400,
    code: 'invalid_input',
    says: /body: /,
  },
  {
    what: 'a body of another media type',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => ({ rawBody: 'blueprint=x', contentType: 'application/x-www-form-urlencoded' }),
    status: 415,
    code: 'unsupported_media_type',
    says: /application\/x-www-form-urlencoded/,
  },
  {
    what: 'an oversized body',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: { big: 'x'.repeat(BODY_LIMIT + 1) } }),
    status: 413,
    code: 'payload_too_large',
    says: /too large/i,
  },
  {
    what: 'a missing field',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => json({}),
    status: 400,
    code: 'invalid_input',
    says: /body\.blueprint/,
  },
  {
    what: 'a field of the wrong type',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => json({ blueprint: true }),
    status: 400,
    code: 'invalid_input',
    says: /body\.blueprint/,
  },
  {
    what: 'an unknown field',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, holder: 'someone-else' }),
    status: 400,
    code: 'invalid_input',
    says: /body: Unrecognized key: "holder"/,
  },
  {
    what: 'an expiry time that is not a time',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresAt: 'tomorrow' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresAt: expected an ISO 8601 time/,
  },
  {
    what: 'an expiry time without its offset',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresAt: '2030-01-01T00:00:00' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresAt/,
  },
  {
    what: 'an expiry time as a number',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresAt: 1893456000000 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresAt/,
  },
  {
    what: 'an expiry time in the past',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresAt: '2001-01-01T00:00:00Z' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresAt: must be in the future/,
  },
  {
    what: 'both an expiry time and a term',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresAt: '2099-01-01T00:00:00Z', expiresInMs: 60_000 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresInMs: give expiresAt or expiresInMs, not both/,
  },
  {
    what: 'a term under a second',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, expiresInMs: 10 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.expiresInMs: expected at least 1 s/,
  },
  {
    what: 'a heartbeat as text',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, heartbeatMs: '30s' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.heartbeatMs/,
  },
  {
    what: 'a heartbeat longer than a day',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, heartbeatMs: 2 * 24 * 3600 * 1000 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.heartbeatMs/,
  },
  {
    what: 'a priority above 9',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, priority: 10 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.priority: expected a priority of 0 to 9/,
  },
  {
    what: 'queue neither true nor false',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, queue: 'no' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.queue: /,
  },
  {
    what: 'a selector that cannot be read',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, selector: 'os=linux,' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.selector: a label key is missing at character 10/,
  },
  {
    what: 'a selector no blueprint can match, without a blueprint',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => json({ selector: 'gpu=h100' }),
    status: 400,
    code: 'invalid_input',
    says: /no blueprint that takes leases can ever match selector gpu=h100/,
  },
  {
    what: 'neither a blueprint nor a selector',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => json({}),
    status: 400,
    code: 'invalid_input',
    says: /body\.blueprint: name a blueprint, a selector, or both/,
  },
  {
    what: 'a blueprint label value that is not one',
    method: 'PATCH',
    path: (f) => `/v1/blueprints/${f.blueprint}`,
    options: () => json({ labels: { os: 'linux!' } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.labels\.os: "linux!" is not a label value/,
  },
  {
    what: 'a team of weight 0',
    method: 'POST',
    path: () => '/v1/teams/heavy',
    options: () => json({ weight: 0 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.weight: expected a weight of 1 to 1000/,
  },
  {
    what: 'a team name with capitals',
    method: 'POST',
    path: () => '/v1/teams/Heavy',
    options: () => json({}),
    status: 400,
    code: 'invalid_input',
    says: /params\.name: use 1-63 lower-case letters/,
  },
  {
    what: 'a quota of a team that does not exist',
    method: 'POST',
    path: () => '/v1/teams/nobody/quotas',
    options: () => json({ maxLeases: 1 }),
    status: 404,
    code: 'not_found',
    says: /team nobody does not exist: make it with/,
  },
  {
    what: 'a negative quota',
    method: 'POST',
    path: () => '/v1/teams/default/quotas',
    options: () => json({ maxLeases: -1 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.maxLeases: expected 0 \(no new leases\) or more/,
  },
  {
    what: 'a quota at a blueprint that does not exist',
    method: 'POST',
    path: () => '/v1/teams/default/quotas',
    options: () => json({ blueprint: 'no-such-blueprint', maxLeases: 1 }),
    status: 404,
    code: 'not_found',
    says: /blueprint no-such-blueprint does not exist/,
  },
  {
    what: 'removing a quota that was never set',
    method: 'POST',
    path: () => '/v1/teams/default/quotas/remove',
    options: () => json({ holder: 'token:nobody' }),
    status: 404,
    code: 'not_found',
    says: /no quota is set for holder token:nobody of team default overall/,
  },
  {
    what: 'a wait timeout under a second',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, waitTimeoutMs: 500 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.waitTimeoutMs: expected at least 1 s/,
  },
  {
    what: "a holder's callback on lease create to a host not allowed",
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, callback: { url: 'http://169.254.169.254/latest' } }),
    status: 400,
    code: 'invalid_input',
    says: /callback\.url: host "169\.254\.169\.254" is not allowed/,
  },
  {
    what: 'a renewal with a negative term',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'renew', payload: { expiresInMs: -5 } }),
    status: 400,
    code: 'invalid_input',
    says: /payload\.expiresInMs/,
  },
  {
    what: 'a callback to a host not allowed',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', callback: { url: 'http://169.254.169.254/latest' } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.callback\.url/,
  },
  {
    what: 'a callback that is not a URL',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', callback: { url: 'somewhere' } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.callback\.url/,
  },
  {
    what: 'a callback with an unknown field',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', callback: { url: 'http://127.0.0.1:9/x', secret: 'x' } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.callback: Unrecognized key: "secret"/,
  },
  {
    what: 'attributes that are not an object',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: [1] }),
    status: 400,
    code: 'invalid_input',
    says: /body\.attributes/,
  },
  {
    what: 'an unknown blueprint',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => json({ blueprint: 'no-such-pool' }),
    status: 404,
    code: 'not_found',
    says: /blueprint no-such-pool does not exist/,
  },
  {
    what: 'an unknown command kind',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'explode' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.kind/,
  },
  {
    what: 'an internal command kind',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'destroy' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.kind/,
  },
  {
    what: 'a payload the kind does not take',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', payload: { force: true } }),
    status: 400,
    code: 'invalid_input',
    says: /payload/,
  },
  {
    what: 'a version nobody handles',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', version: 9 }),
    status: 400,
    code: 'invalid_input',
    says: /no version 9/,
  },
  {
    what: 'a reason too long',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', reason: 'r'.repeat(1001) }),
    status: 400,
    code: 'invalid_input',
    says: /body\.reason/,
  },
  {
    what: 'a wait too long',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands?wait=61`,
    options: () => json({ kind: 'release' }),
    status: 400,
    code: 'invalid_input',
    says: /query\.wait/,
  },
  {
    what: 'a wait that is not a number',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands?wait=soon`,
    options: () => json({ kind: 'release' }),
    status: 400,
    code: 'invalid_input',
    says: /query\.wait/,
  },
  {
    what: 'an unknown query parameter',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands?force=1`,
    options: () => json({ kind: 'release' }),
    status: 400,
    code: 'invalid_input',
    says: /query: Unrecognized key: "force"/,
  },
  {
    what: 'an id that is not a number',
    method: 'POST',
    path: () => '/v1/leases/abc/commands',
    options: () => json({ kind: 'release' }),
    status: 400,
    code: 'invalid_input',
    says: /params\.id/,
  },
  { what: 'an id of zero', method: 'GET', path: () => '/v1/leases/0', status: 400, code: 'invalid_input', says: /params\.id/ },
  { what: 'a negative id', method: 'GET', path: () => '/v1/commands/-4', status: 400, code: 'invalid_input', says: /params\.id/ },
  {
    what: 'an id far too large',
    method: 'GET',
    path: () => '/v1/resources/99999999999999999999',
    status: 400,
    code: 'invalid_input',
    says: /params\.id/,
  },
  { what: 'an unknown lease', method: 'GET', path: () => '/v1/leases/424242', status: 404, code: 'not_found', says: /lease 424242 does not exist/ },
  { what: 'a cursor that is not an id', method: 'GET', path: () => '/v1/leases?after=abc', status: 400, code: 'invalid_input', says: /query\.after/ },
  { what: 'a cursor of zero', method: 'GET', path: () => '/v1/commands?after=0', status: 400, code: 'invalid_input', says: /query\.after/ },
  { what: 'a page too large', method: 'GET', path: () => '/v1/resources?limit=100000', status: 400, code: 'invalid_input', says: /query\.limit/ },
  {
    what: 'a state that does not exist',
    method: 'GET',
    path: () => '/v1/leases?state=sleeping',
    status: 400,
    code: 'invalid_input',
    says: /query\.state/,
  },
  {
    what: 'a target filter of the wrong form',
    method: 'GET',
    path: () => '/v1/commands?target=lease-4',
    status: 400,
    code: 'invalid_input',
    says: /query\.target/,
  },
  {
    what: 'a blueprint filter naming nothing',
    method: 'GET',
    path: () => '/v1/leases?blueprint=nothing-here',
    status: 404,
    code: 'not_found',
    says: /blueprint nothing-here/,
  },
  {
    what: 'a blueprint with an invalid name',
    method: 'POST',
    path: () => '/v1/blueprints',
    options: () => json({ name: 'Bad Name', driver: 'simulated', maxResources: 1 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.name/,
  },
  {
    what: 'a blueprint with bad driver settings',
    method: 'POST',
    path: () => '/v1/blueprints',
    options: () => json({ name: 'bad-settings', driver: 'simulated', maxResources: 1, settings: { latencyMs: 5 } }),
    status: 400,
    code: 'invalid_input',
    says: /settings/,
  },
  {
    what: 'a blueprint change naming nothing',
    method: 'PATCH',
    path: (f) => `/v1/blueprints/${f.blueprint}`,
    options: () => json({}),
    status: 400,
    code: 'invalid_input',
    says: /at least one/,
  },
  {
    what: 'a priority step longer than a day',
    method: 'PATCH',
    path: (f) => `/v1/blueprints/${f.blueprint}`,
    options: () => json({ priorityStepMs: 2 * 24 * 3600 * 1000 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.priorityStepMs: expected at most a day/,
  },
  {
    what: 'a longest hold shorter than a second',
    method: 'PATCH',
    path: (f) => `/v1/blueprints/${f.blueprint}`,
    options: () => json({ maxHoldMs: 999 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.maxHoldMs: expected at least 1 s/,
  },
  {
    what: "a fair share's half-life of no time",
    method: 'PATCH',
    path: (f) => `/v1/blueprints/${f.blueprint}`,
    options: () => json({ fairShareHalfLifeMs: 0 }),
    status: 400,
    code: 'invalid_input',
    says: /body\.fairShareHalfLifeMs: /,
  },
  {
    what: 'a route that does not exist',
    method: 'GET',
    path: () => '/v1/leasez',
    status: 404,
    code: 'no_such_route',
    says: /no route GET \/v1\/leasez/,
  },
  // What PostgreSQL cannot store, refused before it gets there (src/domain/storableValue.ts).
  {
    what: 'a NUL in a reason',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => json({ kind: 'release', reason: 'a\u0000b' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.reason: must not contain the NUL character/,
  },
  {
    what: 'a NUL in an attribute key',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: { 'a\u0000': 1 } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.attributes: has a key that must not contain the NUL character/,
  },
  {
    what: 'a NUL in a nested attribute value',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: { team: { name: ['ok', 'x\u0000'] } } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.attributes\.team\.name\.1: must not contain the NUL/,
  },
  {
    what: 'a NUL in driver settings',
    method: 'POST',
    path: () => '/v1/blueprints',
    options: () => json({ name: 'nul-settings', driver: 'directory', maxResources: 1, settings: { root: '/tmp/a\u0000b' } }),
    status: 400,
    code: 'invalid_input',
    says: /body\.settings\.root: must not contain the NUL/,
  },
  {
    what: 'a NUL in a list filter',
    method: 'GET',
    path: () => '/v1/leases?holder=a%00b',
    status: 400,
    code: 'invalid_input',
    says: /query\.holder: must not contain the NUL/,
  },
  {
    what: 'a NUL in a path segment',
    method: 'GET',
    path: () => '/v1/blueprints/a%00b',
    status: 400,
    code: 'invalid_input',
    says: /params\.ref: must not contain the NUL/,
  },
  {
    what: 'a lone surrogate in a reason',
    method: 'POST',
    path: (f) => `/v1/leases/${f.lease}/commands`,
    options: () => ({ rawBody: '{"kind":"release","reason":"\\ud800"}' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.reason: must be valid Unicode/,
  },
  {
    what: 'attributes nested 20,000 deep',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => ({ rawBody: `{"blueprint":"${f.blueprint}","attributes":{"a":${'['.repeat(20_000)}${']'.repeat(20_000)}}}` }),
    status: 400,
    code: 'invalid_input',
    says: /body\.attributes\.a(\.0)+: is nested too deep: at most 32 levels/,
  },
  {
    what: 'attributes one level too deep',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: nested(MAX_JSON_DEPTH) }),
    status: 400,
    code: 'invalid_input',
    says: /body\.attributes(\.a)+: is nested too deep/,
  },
  // Ids and refs beyond what an id column holds.
  {
    what: 'a blueprint id beyond bigint in the path',
    method: 'GET',
    path: () => '/v1/blueprints/99999999999999999999',
    status: 400,
    code: 'invalid_input',
    says: /params\.ref: expected a blueprint name, or an id of at most 15 digits/,
  },
  {
    what: 'a blueprint id beyond bigint as a filter',
    method: 'GET',
    path: () => '/v1/leases?blueprint=99999999999999999999',
    status: 400,
    code: 'invalid_input',
    says: /query\.blueprint/,
  },
  {
    what: 'a blueprint id beyond bigint in a body',
    method: 'POST',
    path: () => '/v1/leases',
    options: () => ({ rawBody: '{"blueprint":99999999999999999999}' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.blueprint/,
  },
  {
    what: 'a lease id far too large',
    method: 'POST',
    path: () => '/v1/leases/99999999999999999999/commands',
    options: () => json({ kind: 'release' }),
    status: 400,
    code: 'invalid_input',
    says: /params\.id/,
  },
  {
    what: 'a command id far too large',
    method: 'POST',
    path: () => '/v1/commands/99999999999999999999/cancel',
    options: () => json({}),
    status: 400,
    code: 'invalid_input',
    says: /params\.id/,
  },
  {
    what: 'a target id far too large',
    method: 'GET',
    path: () => '/v1/commands?target=lease:99999999999999999999',
    status: 400,
    code: 'invalid_input',
    says: /query\.target/,
  },
  // Bodies and URLs fastify refuses, in Slipway's words.
  {
    what: 'a text/plain body',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => ({ rawBody: f.blueprint, contentType: 'text/plain' }),
    status: 415,
    code: 'unsupported_media_type',
    says: /application\/json, not text\/plain/,
  },
  {
    what: 'a __proto__ key',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => ({ rawBody: `{"blueprint":"${f.blueprint}","__proto__":{"admin":true}}` }),
    status: 400,
    code: 'forbidden_key',
    says: /the key "__proto__" is not accepted/,
  },
  {
    what: 'a constructor.prototype key',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, attributes: { a: [{ constructor: { prototype: {} } }] } }),
    status: 400,
    code: 'forbidden_key',
    says: /the key "constructor.prototype" is not accepted/,
  },
  {
    what: 'bad percent-encoding in the path',
    method: 'GET',
    path: () => '/v1/leases/%zz',
    status: 400,
    code: 'invalid_url',
    says: /percent-encoded/,
  },
  {
    what: 'a reservation whose window ends before it starts',
    method: 'POST',
    path: () => '/v1/reservations',
    options: (f) => json({ blueprint: f.blueprint, slots: 1, from: '2090-01-01T20:00:00Z', to: '2090-01-01T18:00:00Z' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.to: must be after from: a window ends after it starts/,
  },
  {
    what: 'a reservation whose window is over',
    method: 'POST',
    path: () => '/v1/reservations',
    options: (f) => json({ blueprint: f.blueprint, slots: 1, from: '2020-01-01T18:00:00Z', to: '2020-01-01T20:00:00Z' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.to: the window is over already: give a window that ends in the future/,
  },
  {
    what: 'a reservation of no slots',
    method: 'POST',
    path: () => '/v1/reservations',
    options: (f) => json({ blueprint: f.blueprint, slots: 0, from: '2090-01-01T18:00:00Z', to: '2090-01-01T20:00:00Z' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.slots: expected at least 1 slot/,
  },
  {
    what: 'a reservation whose window is not a time',
    method: 'POST',
    path: () => '/v1/reservations',
    options: (f) => json({ blueprint: f.blueprint, slots: 1, from: 'tonight', to: '2090-01-01T20:00:00Z' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.from: expected an ISO 8601 time with its offset, e.g. 2030-01-01T18:00:00Z/,
  },
  {
    what: 'a reservation for a blueprint that does not exist',
    method: 'POST',
    path: () => '/v1/reservations',
    options: () => json({ blueprint: 'nowhere', slots: 1, from: '2090-01-01T18:00:00Z', to: '2090-01-01T20:00:00Z' }),
    status: 404,
    code: 'not_found',
    says: /blueprint nowhere does not exist/,
  },
  {
    what: 'a reservation for a team that does not exist',
    method: 'POST',
    path: () => '/v1/reservations',
    options: (f) => json({ blueprint: f.blueprint, slots: 1, from: '2090-01-01T18:00:00Z', to: '2090-01-01T20:00:00Z', team: 'nobody' }),
    status: 404,
    code: 'not_found',
    says: /team nobody does not exist/,
  },
  {
    what: 'a reservation list in a state there is not',
    method: 'GET',
    path: () => '/v1/reservations?state=soon',
    status: 400,
    code: 'invalid_input',
    says: /state/,
  },
  {
    what: 'a reservation cancel of one that does not exist',
    method: 'POST',
    path: () => '/v1/reservations/999999/cancel',
    options: () => json({}),
    status: 404,
    code: 'not_found',
    says: /reservation 999999 does not exist/,
  },
  {
    what: 'a lease naming a reservation that is not an id',
    method: 'POST',
    path: () => '/v1/leases',
    options: (f) => json({ blueprint: f.blueprint, reservation: 'soon' }),
    status: 400,
    code: 'invalid_input',
    says: /body\.reservation/,
  },
];

test(`${BAD_REQUESTS.length} kinds of bad API request: each a clear 4xx naming the problem, with nothing written`, async () => {
  const before = await rowCounts(env.database.db);
  for (const bad of BAD_REQUESTS) {
    const answer = await env.as.admin.call(bad.method, bad.path(fixture), bad.options?.(fixture) ?? {});
    const said = `${bad.what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 500)}`;
    expect(answer.status, said).toBe(bad.status);
    expect(answer.body.code, said).toBe(bad.code);
    expect(`${answer.body.message} ${answer.body.details.field ?? ''}`, said).toMatch(bad.says);
    expect(answer.body.details.requestId, said).toBe(answer.headers.get('x-request-id'));
    expect(JSON.stringify(answer.body), said).not.toMatch(/\bat .*\.ts:\d+/);
  }
  expect(await rowCounts(env.database.db)).toEqual(before);
});

interface BadPage {
  readonly what: string;
  readonly path: (f: Fixture) => string;
  /** A form posted to the path (with the session's CSRF token); a GET without. */
  readonly form?: Record<string, string>;
  /** A Cookie header instead of the signed-in session's. */
  readonly cookie?: string;
  readonly status: number;
  /** Matches the page, or where it sends the browser. */
  readonly says: RegExp;
}

const BAD_PAGES: readonly BadPage[] = [
  { what: 'a lease id far too large', path: () => '/leases/99999999999999999999', status: 400, says: /params\.id/ },
  { what: 'a NUL in a list filter', path: () => '/leases?holder=a%00b', status: 400, says: /query\.holder: must not contain the NUL/ },
  { what: 'a blueprint filter beyond bigint', path: () => '/leases?blueprint=99999999999999999999', status: 400, says: /query\.blueprint/ },
  { what: 'a target filter beyond bigint', path: () => '/commands?target=lease:99999999999999999999', status: 400, says: /query\.target/ },
  {
    what: 'a NUL in a button reason',
    path: (f) => `/leases/${f.lease}/commands`,
    form: { kind: 'release', reason: 'a\u0000b' },
    status: 400,
    says: /body\.reason: must not contain the NUL/,
  },
  { what: 'a button for a command id far too large', path: () => '/commands/99999999999999999999/cancel', form: {}, status: 400, says: /params\.id/ },
  {
    what: 'a malformed session cookie (treated as none)',
    path: () => '/leases',
    cookie: 'slipway_session=%zz',
    status: 303,
    says: /^\/sign-in\?next=/,
  },
  {
    what: 'a Cookie header of no cookie at all (treated as none)',
    path: () => '/leases',
    cookie: '=;;=; slipway_session',
    status: 303,
    says: /^\/sign-in\?next=/,
  },
  {
    what: 'a malformed sign-in form cookie (a CSRF refusal)',
    path: () => '/sign-in',
    cookie: 'slipway_sign_in="%E0%A4%A',
    form: { _csrf: 'not-the-cookie', token: 'x' },
    status: 403,
    says: /CSRF token does not match/,
  },
];

test(`${BAD_PAGES.length} kinds of bad web request: each a 4xx page naming the problem (or no session), with nothing written`, async () => {
  const browser = new WebClient(env.server.url);
  expect((await browser.signIn(env.as.admin.token!)).status).toBe(303);
  const before = await rowCounts(env.database.db);
  for (const bad of BAD_PAGES) {
    const client = bad.cookie === undefined ? browser : new WebClient(env.server.url);
    const headers: Record<string, string> = bad.cookie === undefined ? {} : { cookie: bad.cookie };
    const answer = bad.form === undefined ? await client.get(bad.path(fixture), headers) : await client.post(bad.path(fixture), bad.form, headers);
    const said = `${bad.what}: ${answer.status} ${answer.text.slice(0, 500)}`;
    expect(answer.status, said).toBe(bad.status);
    expect(answer.headers.get('location') ?? answer.text, said).toMatch(bad.says);
    if (answer.status >= 400) expect(answer.headers.get('content-type'), said).toMatch(/^text\/html/);
  }
  expect(await rowCounts(env.database.db)).toEqual(before);
});

interface BadCommandLine {
  readonly what: string;
  readonly args: (f: Fixture) => string[];
  readonly exitCode: number;
  /** Matches the one error line. */
  readonly says: RegExp;
}

const LONG = 'x'.repeat(10_000);

const BAD_COMMAND_LINES: readonly BadCommandLine[] = [
  {
    what: 'blueprint create with an unknown driver',
    args: () => ['blueprint', 'create', '--name', 'x1', '--driver', 'ftp', '--max-resources', '1'],
    exitCode: 2,
    says: /--driver .*'ftp' is invalid/,
  },
  {
    what: 'blueprint create without a required option',
    args: () => ['blueprint', 'create', '--name', 'x2', '--driver', 'simulated'],
    exitCode: 2,
    says: /required option '--max-resources <n>' not specified/,
  },
  {
    what: 'blueprint create with a non-numeric limit',
    args: () => ['blueprint', 'create', '--name', 'x3', '--driver', 'simulated', '--max-resources', 'many'],
    exitCode: 2,
    says: /--max-resources .*expected a whole number/,
  },
  {
    what: 'blueprint create with settings that are not JSON',
    args: () => ['blueprint', 'create', '--name', 'x4', '--driver', 'simulated', '--max-resources', '1', '--settings', '{nope'],
    exitCode: 2,
    says: /--settings .*expected JSON/,
  },
  {
    what: 'blueprint create with a setting the driver refuses',
    args: () => ['blueprint', 'create', '--name', 'x5', '--driver', 'simulated', '--max-resources', '1', '--setting', 'latencyMs=5'],
    exitCode: 2,
    says: /invalid settings for the simulated driver: settings\.latencyMs/,
  },
  {
    what: 'blueprint create with a check interval that is not a duration',
    args: () => ['blueprint', 'create', '--name', 'x7', '--driver', 'simulated', '--max-resources', '1', '--check-interval', 'often'],
    exitCode: 2,
    says: /--check-interval .*expected a duration like 90s/,
  },
  {
    what: 'blueprint create with a check interval under a second',
    args: () => ['blueprint', 'create', '--name', 'x8', '--driver', 'simulated', '--max-resources', '1', '--check-interval', '0s'],
    exitCode: 2,
    says: /--check-interval .*expected a duration longer than 0/,
  },
  {
    what: 'blueprint create with no cleaning attempts',
    args: () => ['blueprint', 'create', '--name', 'x9', '--driver', 'simulated', '--max-resources', '1', '--clean-attempts', '0'],
    exitCode: 2,
    says: /--clean-attempts /,
  },
  {
    what: 'blueprint limits with a priority step that is neither a duration nor off',
    args: (f) => ['blueprint', 'limits', f.blueprint, '--priority-step', 'soon'],
    exitCode: 2,
    says: /--priority-step /,
  },
  {
    what: 'blueprint limits with cleaning neither on nor off',
    args: (f) => ['blueprint', 'limits', f.blueprint, '--clean-between-leases', 'maybe'],
    exitCode: 2,
    says: /--clean-between-leases .*expected on or off/,
  },
  {
    what: 'a cordon of a resource that does not exist',
    args: () => ['resource', 'cordon', '99999999'],
    exitCode: 3,
    says: /resource 99999999/,
  },
  {
    what: 'blueprint create with a bad name',
    args: () => ['blueprint', 'create', '--name', 'Not A Name', '--driver', 'simulated', '--max-resources', '1'],
    exitCode: 2,
    says: /invalid blueprint: name/,
  },
  {
    what: 'blueprint create with a taken name',
    args: (f) => ['blueprint', 'create', '--name', f.blueprint, '--driver', 'simulated', '--max-resources', '1'],
    exitCode: 4,
    says: /a blueprint named "sim-[^"]+" already exists/,
  },
  {
    what: 'blueprint create with a NUL in its settings',
    args: () => ['blueprint', 'create', '--name', 'x6', '--driver', 'directory', '--max-resources', '1', '--settings', '{"root":"/tmp/a\\u0000b"}'],
    exitCode: 2,
    says: /--settings .*root: must not contain the NUL character/,
  },
  {
    what: 'blueprint create with settings nested too deep',
    args: () => [
      'blueprint',
      'create',
      '--name',
      'x7',
      '--driver',
      'simulated',
      '--max-resources',
      '1',
      '--settings',
      `{"a":${'['.repeat(40)}${']'.repeat(40)}}`,
    ],
    exitCode: 2,
    says: /--settings .*is nested too deep: at most 32 levels/,
  },
  {
    what: 'blueprint show with an id beyond bigint',
    args: () => ['blueprint', 'show', '99999999999999999999'],
    exitCode: 2,
    says: /argument 'name\|id'.*expected a blueprint name, or an id of at most 15 digits/,
  },
  {
    what: 'command list with a target without an id',
    args: () => ['command', 'list', '--target', 'lease'],
    exitCode: 2,
    says: /--target .*expected <kind>:<id>/,
  },
  {
    what: 'command list with a target id beyond bigint',
    args: () => ['command', 'list', '--target', 'lease:99999999999999999999'],
    exitCode: 2,
    says: /--target .*expected <kind>:<id>/,
  },
  {
    what: 'command list with an unknown status',
    args: () => ['command', 'list', '--status', 'sleeping'],
    exitCode: 2,
    says: /--status .*expected one of/,
  },
  {
    what: 'command list with an unknown kind',
    args: () => ['command', 'list', '--kind', 'explode'],
    exitCode: 2,
    says: /--kind .*expected a command kind: allocate, .*, cordon, uncordon, /,
  },
  {
    what: 'command list with a limit over the maximum',
    args: () => ['command', 'list', '--limit', '5000'],
    exitCode: 2,
    says: /--limit .*expected at most 1000/,
  },
  { what: 'command show of an unknown command', args: () => ['command', 'show', '999999'], exitCode: 3, says: /command 999999 does not exist/ },
  { what: 'command cancel of an unknown command', args: () => ['command', 'cancel', '999999'], exitCode: 3, says: /command 999999 does not exist/ },
  {
    what: 'command cancel with a non-numeric id',
    args: () => ['command', 'cancel', 'last'],
    exitCode: 2,
    says: /argument 'id'.*expected a whole number/,
  },
  {
    what: 'blueprint top-up of an unknown blueprint',
    args: () => ['blueprint', 'top-up', 'nosuch'],
    exitCode: 3,
    says: /blueprint nosuch does not exist/,
  },
  {
    what: 'lease release with a non-numeric id',
    args: () => ['lease', 'release', 'twelve'],
    exitCode: 2,
    says: /argument 'id'.*expected a whole number/,
  },
  { what: 'lease show with a zero id', args: () => ['lease', 'show', '0'], exitCode: 2, says: /argument 'id'.*expected an id of 1 or more/ },
  {
    what: 'lease create with a bad duration',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--expires-in', '10 minutes'],
    exitCode: 2,
    says: /--expires-in .*expected a duration like/,
  },
  {
    what: 'lease create with a priority of 12',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--priority', '12'],
    exitCode: 2,
    says: /--priority .*12/,
  },
  {
    what: 'lease create in a team that does not exist',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--team', 'nobody'],
    exitCode: 3,
    says: /team nobody does not exist: make it with `slipway team set nobody`/,
  },
  {
    what: 'token create in a team with a bad name',
    args: () => ['token', 'create', '--name', 'x', '--role', 'user', '--team', 'Ops Team'],
    exitCode: 2,
    says: /--team .*use 1-63 lower-case letters/,
  },
  {
    what: 'team set with a weight of 0',
    args: () => ['team', 'set', 'heavy', '--weight', '0'],
    exitCode: 2,
    says: /--weight .*expected at least 1/,
  },
  {
    what: 'team quota without --max',
    args: () => ['team', 'quota', 'default'],
    exitCode: 2,
    says: /required option '--max <n>' not specified/,
  },
  {
    what: 'team quota of a team that does not exist',
    args: () => ['team', 'quota', 'nobody', '--max', '2'],
    exitCode: 3,
    says: /team nobody does not exist/,
  },
  {
    what: 'lease create with a wait timeout that is not a duration',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--wait-timeout', 'soon'],
    exitCode: 2,
    says: /--wait-timeout .*expected a duration like/,
  },
  {
    what: 'lease create with neither a blueprint nor a selector',
    args: () => ['lease', 'create'],
    exitCode: 2,
    says: /blueprint: name a blueprint, a selector, or both/,
  },
  {
    what: 'lease create with a selector that cannot be read',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--selector', 'gpu in a100'],
    exitCode: 2,
    says: /--selector .*"in" needs a list of values in parentheses/,
  },
  {
    what: 'lease create with a selector no resource of the blueprint can match',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--selector', 'gpu=a100'],
    exitCode: 2,
    says: /can ever match selector gpu=a100: gpu=a100, but there is no gpu label/,
  },
  {
    what: 'blueprint create with a label key that is not one',
    args: () => ['blueprint', 'create', '--name', 'x10', '--driver', 'simulated', '--max-resources', '1', '--label', 'bad key=x'],
    exitCode: 2,
    says: /labels\.bad key: "bad key" is not a label key/,
  },
  {
    what: 'lease create on an unknown blueprint',
    args: () => ['lease', 'create', '--blueprint', 'nosuch'],
    exitCode: 3,
    says: /blueprint nosuch does not exist/,
  },
  {
    what: 'lease create on a blueprint id beyond bigint',
    args: () => ['lease', 'create', '--blueprint', '99999999999999999999'],
    exitCode: 2,
    says: /--blueprint .*an id of at most 15 digits/,
  },
  { what: 'lease list with an unknown state', args: () => ['lease', 'list', '--state', 'sleeping'], exitCode: 2, says: /--state .*expected one of/ },
  {
    what: 'lease list with a blueprint id beyond bigint',
    args: () => ['lease', 'list', '--blueprint', '99999999999999999999'],
    exitCode: 2,
    says: /--blueprint .*an id of at most 15 digits/,
  },
  {
    what: 'lease create with a bad timeout',
    args: (f) => ['lease', 'create', '--blueprint', f.blueprint, '--timeout', '-1'],
    exitCode: 2,
    says: /--timeout .*expected a number of seconds/,
  },
  { what: 'lease release of an unknown lease', args: () => ['lease', 'release', '999999'], exitCode: 3, says: /lease 999999 does not exist/ },
  {
    what: 'lease show with a 10,000-character id (not echoed whole)',
    args: () => ['lease', 'show', LONG],
    exitCode: 2,
    says: /value 'x{80}… \(10000 characters\)' is invalid for argument 'id'\. expected a whole number/,
  },
  {
    what: 'lease list with a 10,000-character holder (not echoed whole)',
    args: () => ['lease', 'list', `--holder=${LONG}`],
    exitCode: 2,
    says: /--holder .*x{80}… \(10000 characters\).*expected at most 200 characters/,
  },
  {
    what: 'reservation create of no slots',
    args: (f) => ['reservation', 'create', '--blueprint', f.blueprint, '--slots', '0', '--to', '+1h'],
    exitCode: 2,
    says: /--slots/,
  },
  {
    what: 'reservation create with a window end that is not a time',
    args: (f) => ['reservation', 'create', '--blueprint', f.blueprint, '--slots', '1', '--to', 'tomorrow'],
    exitCode: 2,
    says: /--to .*expected now, \+<duration> \(e\.g\. \+2h\) or an ISO 8601 time with its offset/,
  },
  {
    what: 'reservation create with a window that ends before it starts',
    args: (f) => ['reservation', 'create', '--blueprint', f.blueprint, '--slots', '1', '--from', '+2h', '--to', '+1h'],
    exitCode: 2,
    says: /to: must be after from: a window ends after it starts/,
  },
  {
    what: 'reservation create with a window that is over',
    args: (f) => [
      'reservation',
      'create',
      '--blueprint',
      f.blueprint,
      '--slots',
      '1',
      '--from',
      '2020-01-01T18:00:00Z',
      '--to',
      '2020-01-01T20:00:00Z',
    ],
    exitCode: 2,
    says: /to: the window is over already/,
  },
  {
    what: 'reservation show of an id that is not one',
    args: () => ['reservation', 'show', 'first'],
    exitCode: 2,
    says: /expected a whole number/,
  },
  {
    what: 'reservation cancel of one that does not exist',
    args: () => ['reservation', 'cancel', '999999'],
    exitCode: 3,
    says: /reservation 999999 does not exist/,
  },
  {
    what: 'lease create naming a reservation that does not exist',
    args: () => ['lease', 'create', '--reservation', '999999'],
    exitCode: 3,
    says: /reservation 999999 does not exist: list them with `slipway reservation list`/,
  },
];

test.each(BAD_COMMAND_LINES)('$what: one error line naming it, exit $exitCode, nothing written', async (bad) => {
  const before = await rowCounts(env.database.db);
  const run = await runCli(bad.args(fixture), env.database.url);
  const said = `${run.code} ${run.stderr.slice(0, 500)}`;
  expect(run.code, said).toBe(bad.exitCode);
  expect(run.stdout, said).toBe('');
  expect(run.stderr, said).toMatch(/^error: [^\n]+\n$/);
  // Short, whatever the input: the longest is the list of command kinds an unknown --kind is told (about 410 characters).
  expect(run.stderr.length, said).toBeLessThan(500);
  expect(run.stderr, said).toMatch(bad.says);
  expect(await rowCounts(env.database.db)).toEqual(before);
});
