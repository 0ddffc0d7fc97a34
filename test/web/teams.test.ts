import { expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { WebClient } from './support/WebClient.ts';

// The Teams page and a lease's team on its page.
const env = apiTestEnv();

test('the Teams page lists each team with its weight, what it holds and its quotas; a lease page names and links its team', async () => {
  const blueprint = await simulatedBlueprint(env.as.admin);
  await env.as.admin.post('/v1/teams/ci', { weight: 3 });
  await env.as.admin.post('/v1/teams/ci/quotas', { blueprint: blueprint.name, maxLeases: 2 });
  const lease = await activeLease(env.as.admin, blueprint.name);
  const client = new WebClient(env.server.url);
  await client.signIn(env.as.viewer.token!);

  const page = await client.get('/teams');
  expect(page.status).toBe(200);
  const row = (name: string) =>
    page.text.slice(page.text.indexOf(`<tr id="team-${name}">`), page.text.indexOf('</tr>', page.text.indexOf(`<tr id="team-${name}">`)));
  expect(row('ci')).toMatch(/<td[^>]*>ci<\/td><td[^>]*>3<\/td><td[^>]*>0<\/td><td[^>]*>0<\/td><td[^>]*>0<\/td>/);
  expect(row('ci')).toContain(`0 of 2 at <a href="/blueprints/${blueprint.id}">${blueprint.name}</a>`);
  expect(row('ci')).toContain('(set by token:admin)');
  // The admin's lease is in the default team, as the admin token is.
  expect(row('default')).toMatch(/<td[^>]*>default<\/td><td[^>]*>1<\/td><td[^>]*>4<\/td><td[^>]*>1<\/td><td[^>]*>0<\/td>/);
  expect(page.text).toContain('<a href="/teams"');

  const leasePage = await client.get(`/leases/${lease.id}`);
  expect(leasePage.text).toContain('<dt>Team</dt><dd><a href="/teams#team-default">default</a></dd>');
});
