import { expect } from 'vitest';
import type { ApiClient } from './ApiClient.ts';

let blueprints = 0;

/** A `simulated` blueprint made through the API; `settings` are the driver's; `fields` add to (or name) it. */
export async function simulatedBlueprint(
  admin: ApiClient,
  settings: Record<string, unknown> = {},
  limits: { maxResources?: number; leasesPerResource?: number } = {},
  fields: Record<string, unknown> = {},
): Promise<{ id: number; name: string }> {
  const name = `sim-${++blueprints}-${Math.random().toString(36).slice(2, 7)}`;
  const answer = await admin.post('/v1/blueprints', {
    name,
    driver: 'simulated',
    settings,
    maxResources: limits.maxResources ?? 10,
    leasesPerResource: limits.leasesPerResource ?? 4,
    ...fields,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body;
}

/** A `simulated` blueprint of one slot that preempts with `preemption`, made through the API; `fields` add to (or name) it. */
export async function preemptingSlot(admin: ApiClient, preemption: Record<string, number>, fields: Record<string, unknown> = {}): Promise<string> {
  return (await simulatedBlueprint(admin, {}, { maxResources: 1, leasesPerResource: 1 }, { preemption, ...fields })).name;
}

/** A lease as the API answers it. */
type Lease = { id: number; holder: string; resourceId: number } & Record<string, unknown>;

/** A lease made through the API by `client`, waited for until it is active; `body` adds to the request (a priority, a callback, ...). */
export async function activeLease(client: ApiClient, blueprint: string, body: Record<string, unknown> = {}): Promise<Lease> {
  const answer = await client.post('/v1/leases?wait=60', { blueprint, ...body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(answer.body.lease.state).toBe('active');
  return answer.body.lease;
}

/** A lease requested through the API by `client` that is not served at once: accepted (202), and it waits. */
export async function waitingLease(client: ApiClient, blueprint: string, body: Record<string, unknown> = {}): Promise<Lease> {
  const answer = await client.post('/v1/leases', { blueprint, ...body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(202);
  return answer.body.lease;
}
