import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { ApiClient } from '../api/support/ApiClient.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { parsePromText, total } from '../helpers/promText.ts';
import { createTestDatabase, testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { finished, spawnCli } from './runCli.ts';

/**
 * `slipway worker` with SLIPWAY_METRICS_PORT serves its own /metrics: the
 * commands it drained and the driver calls it made are counted there, and
 * not by the API process that took the requests (nothing counted twice).
 */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let api: ApiServer;
beforeAll(async () => {
  database = await createTestDatabase();
  api = await ApiServer.start(database, loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: 'warn', SLIPWAY_API_PORT: '0' }), testLog);
});
afterAll(async () => {
  await api?.stop();
  await database?.drop();
});

test('a worker-only process serves the metrics of the work it did on SLIPWAY_METRICS_PORT', async () => {
  const child = spawnCli(['worker'], database.url, { SLIPWAY_METRICS_PORT: '0' });
  const output = finished(child);
  let stdout = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  const metricsUrl = await waitFor(
    'the worker to report its metrics URL',
    async () => /^metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics)$/m.exec(stdout)?.[1],
  );

  const { secret } = await createToken(database.db, { name: 'admin', role: 'admin' }, 'test');
  const admin = new ApiClient(api.url, secret);
  const blueprint = await simulatedBlueprint(admin);
  await activeLease(admin, blueprint.name);

  const settledInDb = async () =>
    (await sql<{ n: number }>`select count(*)::int as n from commands where status in ('done', 'failed')`.execute(database.db)).rows[0]!.n;
  const scrapeWorker = async () => {
    const answer = await fetch(metricsUrl);
    expect(answer.status).toBe(200);
    return parsePromText(await answer.text());
  };
  const worker = await waitFor('the worker to count every command it settled', async () => {
    const scraped = await scrapeWorker();
    const expected = await settledInDb();
    return expected > 0 && total(scraped, 'slipway_commands_settled_total') === expected && scraped;
  });
  expect(total(worker, 'slipway_commands_settled_total', { object: 'blueprint', kind: 'need_resource', status: 'done' })).toBe(1);
  expect(total(worker, 'slipway_driver_calls_total', { driver: 'simulated', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
  expect(total(worker, 'slipway_live_workers')).toBe(1);
  // It answers no HTTP API requests, so it counts none.
  expect(total(worker, 'slipway_http_requests_total')).toBe(0);

  // The API process counted the requests and the appends it made, and none of the drains.
  const apiScrape = parsePromText(await (await fetch(`${api.url}/metrics`)).text());
  expect(total(apiScrape, 'slipway_commands_settled_total')).toBe(0);
  expect(total(apiScrape, 'slipway_driver_calls_total')).toBe(0);
  expect(total(apiScrape, 'slipway_commands_appended_total', { object: 'blueprint', kind: 'need_resource', source: 'api' })).toBe(1);
  expect(total(worker, 'slipway_commands_appended_total', { source: 'api' })).toBe(0);

  const elsewhere = await fetch(metricsUrl.replace(/\/metrics$/, '/healthz'));
  expect(elsewhere.status).toBe(404);

  child.kill('SIGTERM');
  expect((await output).code).toBe(0);
});
