import { expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { WebClient } from './support/WebClient.ts';

// A blueprint's page shows its reservations: on a time line over the coming days, and as a table.
const env = apiTestEnv();

test("a blueprint's page shows its reservations to come and open on a time line and in a table; cancelled ones and those past the line's days are left off the line", async () => {
  const { id, name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 3, leasesPerResource: 1 });
  const at = (ms: number) => new Date(Date.now() + ms).toISOString();
  const day = 86_400_000;
  const reserve = async (body: Record<string, unknown>) => (await env.as.admin.post('/v1/reservations', { blueprint: name, ...body })).body;
  const open = await reserve({ slots: 1, from: at(0), to: at(day), reason: 'release night' });
  const later = await reserve({ slots: 2, from: at(2 * day), to: at(3 * day), team: 'default' });
  const far = await reserve({ slots: 1, from: at(30 * day), to: at(31 * day) });
  const cancelled = await reserve({ slots: 1, from: at(4 * day), to: at(5 * day) });
  await env.as.admin.post(`/v1/reservations/${cancelled.id}/cancel`, {});

  const client = new WebClient(env.server.url);
  await client.signIn(env.as.viewer.token!);
  const page = await client.get(`/blueprints/${id}`);
  expect(page.status).toBe(200);
  expect(page.text).toContain('<h2>Reservations</h2>');
  expect(page.text).toContain('<figcaption>Reservations, the next 7 days</figcaption>');
  expect(page.text).toContain(`data-reservation="${open.id}"`);
  expect(page.text).toContain(`data-reservation="${later.id}"`);
  expect(page.text).not.toContain(`data-reservation="${far.id}"`);
  expect(page.text).not.toContain(`data-reservation="${cancelled.id}"`);
  expect(page.text).toContain(`${later.id}: 2 slot(s), team default`);
  expect(page.text).toContain(`<tr id="reservation-${far.id}">`);
  expect(page.text).not.toContain(`<tr id="reservation-${cancelled.id}">`);
  expect(page.text).toContain('token:admin (api): release night');
});
