import { expect } from 'vitest';
import type { ApiClient } from './ApiClient.ts';

let blueprints = 0;

/** A `simulated` blueprint made through the API; `settings` are the driver's. */
export async function simulatedBlueprint(
  admin: ApiClient,
  settings: Record<string, unknown> = {},
  limits: { maxResources?: number; leasesPerResource?: number } = {},
): Promise<{ id: number; name: string }> {
  const name = `sim-${++blueprints}-${Math.random().toString(36).slice(2, 7)}`;
  const answer = await admin.post('/v1/blueprints', {
    name,
    driver: 'simulated',
    settings,
    maxResources: limits.maxResources ?? 10,
    leasesPerResource: limits.leasesPerResource ?? 4,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body;
}

/** A lease made through the API by `client`, waited for until it is active. */
export async function activeLease(client: ApiClient, blueprint: string): Promise<{ id: number; holder: string; resourceId: number }> {
  const answer = await client.post('/v1/leases?wait=60', { blueprint });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(answer.body.lease.state).toBe('active');
  return answer.body.lease;
}
