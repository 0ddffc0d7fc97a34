import { expect, test } from 'vitest';
import { apiTestEnv } from './support/apiTestEnv.ts';

// Labels and selectors through the HTTP API.
const env = apiTestEnv({ worker: true });

test('a blueprint takes labels; a lease asking only for a selector goes to a blueprint that matches, and its resource shows the labels', async () => {
  const made = await env.as.admin.post('/v1/blueprints', {
    name: 'arm-boxes',
    driver: 'simulated',
    maxResources: 2,
    labels: { arch: 'arm64' },
    settings: { labels: { disk: 'ssd', arch: 'x86' } },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  expect(made.body.labels).toEqual({ arch: 'arm64' });
  await env.as.admin.post('/v1/blueprints', { name: 'x86-boxes', driver: 'simulated', maxResources: 2, labels: { arch: 'amd64' } });

  const asked = await env.as.user.post('/v1/leases?wait=30', { selector: 'arch=arm64, disk in (ssd)' });
  expect(asked.status, JSON.stringify(asked.body)).toBe(200);
  expect(asked.body.lease).toMatchObject({ blueprintName: 'arm-boxes', selector: 'arch=arm64, disk=ssd', state: 'active' });
  const resource = await env.as.viewer.get(`/v1/resources/${asked.body.lease.resourceId}`);
  // The driver's labels, with the blueprint's over them.
  expect(resource.body.resource.labels).toEqual({ disk: 'ssd', arch: 'arm64' });

  const never = await env.as.user.post('/v1/leases', { blueprint: 'x86-boxes', selector: 'arch=arm64' });
  expect(never.status).toBe(400);
  expect(never.body.message).toBe('no resource of blueprint x86-boxes can ever match selector arch=arm64: arch=arm64, but arch is amd64');

  // PATCH replaces the labels, for every resource at once.
  const changed = await env.as.admin.call('PATCH', '/v1/blueprints/arm-boxes', { body: { labels: { arch: 'arm64', zone: 'eu-1' } } });
  expect(changed.status, JSON.stringify(changed.body)).toBe(200);
  expect((await env.as.viewer.get(`/v1/resources/${asked.body.lease.resourceId}`)).body.resource.labels).toEqual({
    disk: 'ssd',
    arch: 'arm64',
    zone: 'eu-1',
  });
  await env.as.user.post(`/v1/leases/${asked.body.lease.id}/commands?wait=30`, { kind: 'release' });
});
