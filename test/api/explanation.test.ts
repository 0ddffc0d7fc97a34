import { expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { NO_SCHEDULED_COLLECTOR, rowCounts } from '../cli/rowCounts.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from './support/fixtures.ts';
import { WebClient } from '../web/support/WebClient.ts';

/**
 * Explanations and dry runs (decision 0044) against the decision itself,
 * with a real worker: what an explanation says would grant a lease now is
 * made, and the lease is then granted; what it says would not, does not.
 * No collector runs: the row counts of a dry run are the service's own.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

type Reason = { kind: string; says: string; change: string | null };

const explain = async (id: number) => {
  const answer = await env.as.viewer.get(`/v1/leases/${id}/explanation`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as { grantedNow: boolean; summary: string; blueprints: Array<{ blueprint: string; grantedNow: boolean; reasons: Reason[] }> };
};

const stateOf = async (id: number) => (await env.as.viewer.get(`/v1/leases/${id}`)).body.lease.state as string;

/** A lease request that is accepted and, once its blueprint decided, still waits. */
async function waitingLease(body: Record<string, unknown>, who = env.as.user) {
  const created = await who.post('/v1/leases?wait=2', body);
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  expect(created.body.lease.state).toBe('pending');
  return created.body.lease as { id: number };
}

const reasonOf = (explanation: Awaited<ReturnType<typeof explain>>, kind: string) => explanation.blueprints[0]!.reasons.find((r) => r.kind === kind);

async function releaseAll(ids: number[]) {
  for (const id of ids) await env.as.admin.post(`/v1/leases/${id}/commands?wait=60`, { kind: 'release' });
}

test('capacity: a full blueprint says so, names the limit that would grant the lease, and raising it does', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const holder = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, expiresInMs: 3_600_000 });
  expect(holder.body.lease.state).toBe('active');
  const waiting = await waitingLease({ blueprint: name });

  const explained = await explain(waiting.id);
  expect(explained.grantedNow).toBe(false);
  expect(reasonOf(explained, 'capacity')).toEqual({
    kind: 'capacity',
    says: `blueprint ${name} is at its limit: 1 of 1 resources, 1 lease(s) each, no free slot`,
    change: `blueprint ${name}'s max resources at 2 (it is 1) would grant it`,
  });
  expect(reasonOf(explained, 'slotFrees')?.says).toMatch(new RegExp(`^lease ${holder.body.lease.id} frees a slot when it expires, in \\d+m`));
  // The lease's page says the same, in its own section.
  const web = new WebClient(env.server.url);
  await web.signIn(env.as.viewer.token!);
  const page = await web.get(`/leases/${waiting.id}`);
  expect(page.status).toBe(200);
  expect(page.text).toContain('<h2>Why it waits</h2>');
  expect(page.text).toContain(`<h3>At ${name}: not granted now</h3>`);
  expect(page.text).toContain(`→ blueprint ${name}&#39;s max resources at 2 (it is 1) would grant it`);
  // Nothing was written, the lease still waits.
  expect(await stateOf(waiting.id)).toBe('pending');

  const raised = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 2 } });
  expect(raised.status, JSON.stringify(raised.body)).toBe(200);
  await expect.poll(() => stateOf(waiting.id), { timeout: 30_000 }).toBe('active');
  await releaseAll([holder.body.lease.id, waiting.id]);
});

test("capacity with a long line ahead: the limit is counted from the lease's place in line, not tried, and raising it to that grants it", async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 10 });
  const holders = await Promise.all(
    Array.from({ length: 10 }, async () => (await env.as.user.post('/v1/leases?wait=60', { blueprint: name, expiresInMs: 3_600_000 })).body.lease.id),
  );
  // More ahead of it than a what-if serves (MAX_SERVED_BY_WHAT_IF, 20).
  const ahead = await Promise.all(Array.from({ length: 25 }, async () => (await waitingLease({ blueprint: name })).id));
  const waiting = await waitingLease({ blueprint: name });

  expect(reasonOf(await explain(waiting.id), 'capacity')?.change).toBe(
    `blueprint ${name}'s max resources at 4 (it is 1): room for the 25 leases ahead of it in line, and for it`,
  );
  const raised = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 4 } });
  expect(raised.status, JSON.stringify(raised.body)).toBe(200);
  await expect.poll(() => stateOf(waiting.id), { timeout: 30_000 }).toBe('active');
  await Promise.all([...holders, ...ahead, waiting.id].map((id) => releaseAll([id])));
});

test('a lease the explanation says is granted now is granted; a dry run of the same request says so and writes nothing', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const before = await rowCounts(env.database.db);
  const dry = await env.as.user.post('/v1/leases?dryRun=true', { blueprint: name });
  expect(dry.status, JSON.stringify(dry.body)).toBe(200);
  expect(dry.body).toMatchObject({ lease: null, state: 'not requested', grantedNow: true, goesTo: name });
  expect(dry.body.blueprints[0].where).toMatch(/^allocating resource \d+ for lease \d+ \(1 of 1\)$/);
  expect(await rowCounts(env.database.db)).toEqual(before);

  const made = await activeLease(env.as.user, name);
  // The same request now: it would wait, for capacity.
  const after = await env.as.user.post('/v1/leases?dryRun=true', { blueprint: name });
  expect(after.body.grantedNow).toBe(false);
  expect(after.body.blueprints[0].reasons.map((r: Reason) => r.kind)).toContain('capacity');
  expect(after.body.summary).toBe(
    `the request would not be granted now: ${name}: blueprint ${name} is at its limit: 1 of 1 resources, 1 lease(s) each, no free slot`,
  );
  const real = await waitingLease({ blueprint: name });
  expect(await stateOf(real.id)).toBe('pending');
  await releaseAll([made.id, real.id]);
});

test('quota: the explanation names the quota and what it counts, and the limit that would grant the lease; raising it to that does', async () => {
  await env.as.admin.post('/v1/teams/explained', {});
  const { secret } = await createToken(env.database.db, { name: 'explained-user', role: 'user', team: 'explained' }, 'test');
  const member = env.as.admin.withToken(secret);
  const { name } = await simulatedBlueprint(env.as.admin);
  expect((await env.as.admin.post('/v1/teams/explained/quotas', { blueprint: name, maxLeases: 1 })).status).toBe(200);
  const first = await activeLease(member, name);
  const waiting = await waitingLease({ blueprint: name }, member);

  const quota = reasonOf(await explain(waiting.id), 'quota');
  expect(quota).toEqual({
    kind: 'quota',
    says: `the quota of team explained at ${name} is reached: 1 of 1 counted (its leases holding or sent to a slot)`,
    change: `the quota of team explained at ${name} at 2 (it is 1) would grant it`,
  });
  expect(await stateOf(waiting.id)).toBe('pending');
  expect((await env.as.admin.post('/v1/teams/explained/quotas', { blueprint: name, maxLeases: 2 })).status).toBe(200);
  await expect.poll(() => stateOf(waiting.id), { timeout: 30_000 }).toBe('active');
  await releaseAll([first.id, waiting.id]);
});

test('a disabled blueprint: enabling it would grant the lease, and does', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const holder = await activeLease(env.as.user, name);
  const waiting = await waitingLease({ blueprint: name });
  expect((await env.as.admin.post(`/v1/blueprints/${name}/disable`)).status).toBe(200);
  expect((await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 2 } })).status).toBe(200);

  const explained = await explain(waiting.id);
  expect(explained.grantedNow).toBe(false);
  expect(reasonOf(explained, 'disabled')).toEqual({
    kind: 'disabled',
    says: `blueprint ${name} is disabled: it makes no resources`,
    change: `enabling blueprint ${name} would grant it`,
  });
  expect(await stateOf(waiting.id)).toBe('pending');
  expect((await env.as.admin.post(`/v1/blueprints/${name}/enable`)).status).toBe(200);
  await expect.poll(() => stateOf(waiting.id), { timeout: 30_000 }).toBe('active');
  await releaseAll([holder.id, waiting.id]);
});

test('priority: the lowest priority that would preempt, which a request of that priority then does, and one below does not', async () => {
  const name = `explained-preempting-${Math.random().toString(36).slice(2, 7)}`;
  const made = await env.as.admin.post('/v1/blueprints', {
    name,
    driver: 'simulated',
    maxResources: 1,
    preemption: { priorityMargin: 3, graceMs: 600_000 },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const victim = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, priority: 1 });
  expect(victim.body.lease.state).toBe('active');
  const waiting = await waitingLease({ blueprint: name, priority: 2 }, env.as.admin);

  const priority = reasonOf(await explain(waiting.id), 'priority');
  expect(priority?.says).toBe('its priority is 2');
  expect(priority?.change).toMatch(
    new RegExp(
      `^priority 4 or more would preempt lease ${victim.body.lease.id} \\(lease ${victim.body.lease.id} preempted for lease \\d+: priority 4 against 1`,
    ),
  );
  // One level below: not granted, no preemption; at it: a preemption.
  const below = await env.as.admin.post('/v1/leases?dryRun=true', { blueprint: name, priority: 3 });
  expect(below.body.grantedNow).toBe(false);
  expect(below.body.blueprints[0].reasons.map((r: Reason) => r.kind)).not.toContain('preemption');
  const at = await env.as.admin.post('/v1/leases?dryRun=true', { blueprint: name, priority: 4 });
  expect(at.body.blueprints[0].reasons[0]).toMatchObject({ kind: 'preemption' });
  expect(await env.as.viewer.get(`/v1/leases/${victim.body.lease.id}`).then((a) => a.body.lease.ending)).toBeNull();

  const urgent = await waitingLease({ blueprint: name, priority: 4 }, env.as.admin);
  await expect
    .poll(async () => (await env.as.viewer.get(`/v1/leases/${victim.body.lease.id}`)).body.lease.ending?.kind, { timeout: 30_000 })
    .toBe('preempted');
  const explained = await explain(urgent.id);
  expect(reasonOf(explained, 'preemption')?.says).toMatch(new RegExp(`^lease ${victim.body.lease.id} is being preempted for it`));
  await releaseAll([waiting.id, urgent.id, victim.body.lease.id]);
});

test('the API validates: an unknown lease is 404, dryRun with wait is 400, a lease not waiting says so', async () => {
  expect((await env.as.viewer.get('/v1/leases/999999999/explanation')).status).toBe(404);
  const both = await env.as.user.post('/v1/leases?dryRun=true&wait=5', { blueprint: 'x' });
  expect(both.status).toBe(400);
  expect(both.body.message).toMatch(/give wait or dryRun, not both/);
  const { name } = await simulatedBlueprint(env.as.admin);
  const active = await activeLease(env.as.user, name);
  expect(await explain(active.id)).toMatchObject({
    grantedNow: false,
    state: 'active',
    summary: `lease ${active.id} is active: it waits for nothing`,
    blueprints: [],
  });
  expect((await env.as.user.post('/v1/leases?dryRun=true', { blueprint: 'no-such-blueprint' })).status).toBe(404);
  await releaseAll([active.id]);
});

test('a dry run by selector alone is decided at each blueprint it may go to, and says where it goes: the one with room', async () => {
  const pool = `pool${Math.random().toString(36).slice(2, 7)}`;
  const blueprint = async (name: string) => {
    const made = await env.as.admin.post('/v1/blueprints', { name, driver: 'simulated', maxResources: 1, leasesPerResource: 1, labels: { pool } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
  };
  await blueprint(`${pool}-full`);
  const holder = await activeLease(env.as.user, `${pool}-full`);
  await blueprint(`${pool}-free`);
  const before = await rowCounts(env.database.db);

  const dry = await env.as.user.post('/v1/leases?dryRun=true', { selector: `pool=${pool}` });
  expect(dry.status, JSON.stringify(dry.body)).toBe(200);
  expect(dry.body).toMatchObject({ grantedNow: true, goesTo: `${pool}-free` });
  expect(dry.body.summary).toMatch(
    new RegExp(`; selector pool=${pool} may be matched at ${pool}-full, ${pool}-free; went to ${pool}-free: room to make a resource`),
  );
  const at = Object.fromEntries(dry.body.blueprints.map((b: { blueprint: string }) => [b.blueprint, b]));
  expect(at[`${pool}-full`]).toMatchObject({ grantedNow: false, reasons: [expect.objectContaining({ kind: 'capacity' })] });
  expect(at[`${pool}-free`]).toMatchObject({ grantedNow: true, reasons: [] });
  expect(await rowCounts(env.database.db)).toEqual(before);

  // The request itself goes there and is granted.
  const real = await env.as.user.post('/v1/leases?wait=60', { selector: `pool=${pool}` });
  expect(real.body.lease).toMatchObject({ state: 'active', blueprintName: `${pool}-free` });
  await releaseAll([holder.id, real.body.lease.id]);
});
