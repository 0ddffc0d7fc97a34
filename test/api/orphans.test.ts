import { beforeAll, expect, test } from 'vitest';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { TEST_GC } from '../gc/support/handDrain.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { WebClient } from '../web/support/WebClient.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';

// Orphans as the API and the web UI show them: a blueprint's `orphans`
// setting, and what the collector's last pass recorded.
const env = apiTestEnv();
const name = 'holding';
let blueprintId: number;

beforeAll(async () => {
  const created = await env.as.admin.post('/v1/blueprints', {
    name,
    driver: 'simulated',
    maxResources: 1,
    settings: {
      holds: [
        { id: 'vm-by-hand', attributes: { ip: '10.0.0.9' } },
        { id: 'vm-7', resourceId: 7 },
      ],
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  expect(created.body).toMatchObject({ orphans: 'report' });
  blueprintId = created.body.id;
});

test('GET /v1/blueprints/{ref}/orphans answers what the last pass found, by name or id; the setting changes with PATCH', async () => {
  expect((await env.as.viewer.get(`/v1/blueprints/${name}/orphans`)).body).toEqual({ blueprint: name, orphans: [] });
  // A pass of its own (a scheduled one running at the same moment makes this one skip: then that one records them).
  await runCollectorPass(env.database, TEST_GC, 'cli', testLog);
  const answer = await waitFor('the orphans recorded', async () => {
    const got = await env.as.viewer.get(`/v1/blueprints/${blueprintId}/orphans`);
    return got.body.orphans?.length === 2 ? got : undefined;
  });
  expect(answer.status).toBe(200);
  expect(answer.body.orphans).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ id: 'vm-by-hand', resourceId: null, attributes: { ip: '10.0.0.9' }, passes: expect.any(Number) }),
      expect.objectContaining({ id: 'vm-7', resourceId: 7, attributes: {} }),
    ]),
  );
  expect((await env.as.viewer.get('/v1/blueprints/nothing-here/orphans')).status).toBe(404);

  const wrong = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { orphans: 'delete' } });
  expect(wrong.status).toBe(400);
  expect(JSON.stringify(wrong.body)).toContain('expected one of: report, destroy');
  const changed = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { orphans: 'destroy' } });
  expect(changed.status).toBe(200);
  expect(changed.body).toMatchObject({ orphans: 'destroy' });
  const back = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { orphans: 'report' } });
  expect(back.body).toMatchObject({ orphans: 'report' });
});

test("the blueprint's page shows its setting and its orphans", async () => {
  await waitFor('the orphans recorded', async () =>
    (await env.as.viewer.get(`/v1/blueprints/${name}/orphans`)).body.orphans?.length === 2 ? true : undefined,
  );
  const client = new WebClient(env.server.url);
  await client.signIn(env.as.viewer.token!);
  const page = (await client.get(`/blueprints/${blueprintId}`)).text;
  expect(page).toContain('<dt>Orphans</dt><dd>report: reported');
  expect(page).toContain('vm-by-hand');
  expect(page).toContain('<a href="/resources/7">');
});
