import { sql } from 'kysely';
import { expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { byLabels, parsePromText, type Scraped, total } from '../helpers/promText.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';
import { ApiClient } from './support/ApiClient.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';

/**
 * GET /metrics on a real server with a real worker in the same process (as
 * `slipway start`): after real work, every family is described, the
 * counters agree with what the database says was done, the gauges with
 * what it holds, and no label carries an object id.
 */
// No scheduled collector: its pass lists each blueprint's resources and slots, driver calls that make no effect the counts below compare with.
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

async function scrape(client: ApiClient = env.anonymous): Promise<Scraped> {
  const answer = await fetch(`${client.baseUrl}/metrics`, client.token ? { headers: { authorization: `Bearer ${client.token}` } } : {});
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePromText(await answer.text());
}

/** Waits until nothing is due or running: every command the work led to has settled. */
async function settled(): Promise<void> {
  await waitFor('every due command to settle', async () => {
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from commands where status = 'running' or (status = 'queued' and not_before <= now())`.execute(env.database.db);
    return rows[0]!.n === 0;
  });
}

const FAMILIES = [
  'slipway_commands_appended_total',
  'slipway_commands_settled_total',
  'slipway_command_queued_seconds',
  'slipway_command_running_seconds',
  'slipway_command_settle_seconds',
  'slipway_drain_batch_commands',
  'slipway_lease_wait_seconds',
  'slipway_preemptions_total',
  'slipway_lease_endings_total',
  'slipway_driver_calls_total',
  'slipway_driver_call_seconds',
  'slipway_http_requests_total',
  'slipway_http_request_seconds',
  'slipway_sweeper_wakes_total',
  'slipway_callback_deliveries_total',
  'slipway_collector_passes_total',
  'slipway_collector_actions_total',
  'slipway_tables_maintained_total',
  'slipway_pg_pool_connections',
  'slipway_commands_backlog',
  'slipway_commands_overdue',
  'slipway_leases',
  'slipway_resources',
  'slipway_waiting_leases',
  'slipway_orphans',
  'slipway_live_workers',
  'slipway_nodejs_eventloop_lag_p99_seconds',
  'slipway_process_cpu_seconds_total',
];

test('after real work, the counters say what was done and the gauges what the database holds', async () => {
  const before = await scrape();
  const blueprint = await simulatedBlueprint(env.as.admin, {}, { maxResources: 2, leasesPerResource: 1 });
  const leases = [await activeLease(env.as.user, blueprint.name), await activeLease(env.as.user, blueprint.name)];
  const release = await env.as.user.post(`/v1/leases/${leases[0]!.id}/commands?wait=60`, { kind: 'release' });
  expect(release.status).toBe(200);
  // A third takes the slot the release freed; a fourth waits, both resources being taken.
  await activeLease(env.as.user, blueprint.name);
  const waiting = await env.as.user.post('/v1/leases', { blueprint: blueprint.name });
  expect(waiting.status).toBe(202);
  await settled();

  const db = env.database.db;
  // Counters are bumped just after their commits, so they are waited for, not read once.
  const after = await waitFor('the settled counters to match the database', async () => {
    const scraped = await scrape();
    const rows = await db
      .selectFrom('commands')
      .select(['target_kind', 'kind', 'status', sql<number>`count(*)::int`.as('n')])
      .where('status', 'in', ['done', 'failed'])
      .groupBy(['target_kind', 'kind', 'status'])
      .execute();
    const expected = Object.fromEntries(rows.map((r) => [`${r.target_kind},${r.kind},${r.status}`, r.n]));
    const counted = byLabels(scraped, 'slipway_commands_settled_total', ['object', 'kind', 'status']);
    return JSON.stringify(sortKeys(counted)) === JSON.stringify(sortKeys(expected)) && scraped;
  });

  // Every family is there and described.
  for (const name of FAMILIES) {
    expect(after.families.get(name)?.help, name).toMatch(/\w{3,}/);
  }
  for (const [name] of after.families) expect(name).toMatch(/^slipway_/);

  // Appends: the user's four leases and one release, as the API counted them.
  const appended = (labels: Record<string, string>) =>
    total(after, 'slipway_commands_appended_total', labels) - total(before, 'slipway_commands_appended_total', labels);
  expect(appended({ object: 'blueprint', kind: 'need_resource', source: 'api' })).toBe(4);
  expect(appended({ object: 'lease', kind: 'release', source: 'api' })).toBe(1);
  const appendedInDb = await db
    .selectFrom('commands')
    .select(['target_kind', 'kind', 'source', sql<number>`count(*)::int`.as('n')])
    .where('status', '<>', 'coalesced')
    .groupBy(['target_kind', 'kind', 'source'])
    .execute();
  expect(sortKeys(byLabels(after, 'slipway_commands_appended_total', ['object', 'kind', 'source']))).toEqual(
    sortKeys(Object.fromEntries(appendedInDb.map((r) => [`${r.target_kind},${r.kind},${r.source}`, r.n]))),
  );

  // Each settled command was timed once.
  expect(total(after, 'slipway_command_settle_seconds_count')).toBe(total(after, 'slipway_commands_settled_total'));
  expect(total(after, 'slipway_command_queued_seconds_count')).toBe(total(after, 'slipway_commands_settled_total'));

  // Lease wait: one observation per lease that became active (three of the
  // four; the fourth waits), under its blueprint's name, each its creation
  // to the commit that activated it (the activation event's time).
  const activations = await db
    .selectFrom('events')
    .innerJoin('leases', 'leases.id', 'events.target_id')
    .select([sql<number>`count(*)::int`.as('n'), sql<number>`sum(extract(epoch from events.created_at - leases.created_at))::float8`.as('seconds')])
    .where('events.target_kind', '=', 'lease')
    .where('events.type', '=', 'state')
    .where('events.to_state', '=', 'active')
    .where('leases.blueprint_id', '=', blueprint.id)
    .executeTakeFirstOrThrow();
  expect(activations.n).toBe(3);
  expect(total(after, 'slipway_lease_wait_seconds_count', { blueprint: blueprint.name })).toBe(activations.n);
  expect(total(after, 'slipway_lease_wait_seconds_sum', { blueprint: blueprint.name })).toBeCloseTo(activations.seconds, 2);

  // Driver calls: the simulated driver records each effect it made; every call succeeded.
  const effects = await db
    .selectFrom('simulated_effects')
    .select(['operation', sql<number>`sum(calls)::int`.as('n')])
    .groupBy('operation')
    .execute();
  expect(sortKeys(byLabels(after, 'slipway_driver_calls_total', ['driver', 'operation', 'outcome']))).toEqual(
    sortKeys(Object.fromEntries(effects.map((e) => [`simulated,${e.operation},ok`, e.n]))),
  );
  expect(total(after, 'slipway_driver_call_seconds_count')).toBe(total(after, 'slipway_driver_calls_total'));

  // HTTP: counted by route pattern, never by the raw URL.
  const httpBefore = total(before, 'slipway_http_requests_total', { method: 'POST', route: '/v1/leases/:id/commands', status: '200' });
  expect(total(after, 'slipway_http_requests_total', { method: 'POST', route: '/v1/leases/:id/commands', status: '200' }) - httpBefore).toBe(1);
  expect(total(after, 'slipway_http_requests_total', { method: 'POST', route: '/v1/leases', status: '202' })).toBeGreaterThanOrEqual(1);

  // Gauges: the same numbers as the database, once the cached reading has been renewed.
  await waitFor('the gauges to match the database', async () => {
    const now = await scrape();
    const leaseRows = await db
      .selectFrom('leases')
      .innerJoin('blueprints', 'blueprints.id', 'leases.blueprint_id')
      .select(['blueprints.name', 'leases.state', sql<number>`count(*)::int`.as('n')])
      .where('leases.state', '<>', 'destroyed')
      .groupBy(['blueprints.name', 'leases.state'])
      .execute();
    const expected = sortKeys(Object.fromEntries(leaseRows.map((r) => [`${r.name},${r.state}`, r.n])));
    const waiters = await db.selectFrom('blueprint_waiters').select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    expect(sortKeys(byLabels(now, 'slipway_leases', ['blueprint', 'state']))).toEqual(expected);
    expect(waiters.n).toBe(1);
    expect(total(now, 'slipway_waiting_leases', { blueprint: blueprint.name })).toBe(waiters.n);
    expect(total(now, 'slipway_live_workers')).toBe(1);
    expect(total(now, 'slipway_commands_backlog', { state: 'queued' })).toBe(0);
    expect(total(now, 'slipway_commands_backlog', { state: 'running' })).toBe(0);
    return true;
  });

  assertNoObjectIds(after);
});

test('no label value is an object id: ids appear only inside route patterns as :id', async () => {
  const scraped = await scrape();
  assertNoObjectIds(scraped);
  expect(byLabels(scraped, 'slipway_http_requests_total', ['route'])).toHaveProperty(['/v1/leases/:id/commands']);
});

test('with SLIPWAY_METRICS_TOKEN set, /metrics needs that bearer token', async () => {
  const token = 'metrics-secret-0123456789';
  const server = await env.startServer({ SLIPWAY_METRICS_TOKEN: token });
  const without = await fetch(`${server.url}/metrics`);
  expect(without.status).toBe(401);
  expect(await without.text()).toContain('Authorization: Bearer <SLIPWAY_METRICS_TOKEN>');
  const wrong = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${token}x` } });
  expect(wrong.status).toBe(401);
  const scraped = await scrape(new ApiClient(server.url, token));
  expect(scraped.families.get('slipway_live_workers')?.type).toBe('gauge');
});

/** Labels that may hold numbers: histogram buckets, quantiles, and HTTP status codes. */
function assertNoObjectIds(scraped: Scraped): void {
  for (const sample of scraped.samples) {
    for (const [label, value] of Object.entries(sample.labels)) {
      // prom-client's own nodejs_version_info names Node's version.
      if (label === 'le' || label === 'quantile' || sample.name === 'slipway_nodejs_version_info') continue;
      if (label === 'status' && /^\d+$/.test(value)) {
        expect(value, `${sample.name} ${label}`).toMatch(/^[1-5]\d\d$/);
        continue;
      }
      expect(value, `${sample.name} ${label}="${value}"`).not.toMatch(/(^|\/)\d+(\/|$)/);
    }
  }
}

function sortKeys(record: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}
