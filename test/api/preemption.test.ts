import { expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { activeLease, preemptingSlot, waitingLease } from './support/fixtures.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';
import { WebClient } from '../web/support/WebClient.ts';

/**
 * Preemption through the API, with a real worker (decision 0043): a
 * waiting lease of high enough priority takes a slot back from an active
 * one, whose holder is told at once and ends at its grace period's end (or
 * earlier, by its own release); the slot goes to the lease it was taken
 * for. No collector runs: the workers' timekeeper ends the victim.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

const leaseOf = async (id: number) => (await env.as.admin.get(`/v1/leases/${id}`)).body.lease;

const commandsOf = (id: number) =>
  env.database.db
    .selectFrom('commands')
    .select(['kind', 'issued_by', 'reason', 'message', 'status'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .orderBy('id')
    .execute();

test('the preemption settings are validated, shown and changed (null: off)', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 2 });
  const shown = (await env.as.viewer.get(`/v1/blueprints/${name}`)).body.blueprint;
  expect(shown.preemption).toEqual({ priorityMargin: 2, minRuntimeMs: 0, graceMs: 300_000, protectedPerTeam: 0 });
  const bad = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { preemption: { priorityMargin: 0 } } });
  expect(bad.status).toBe(400);
  expect(bad.body.message).toMatch(/priorityMargin: expected a margin of 1 to 9/);
  const off = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { preemption: null } });
  expect(off.status, JSON.stringify(off.body)).toBe(200);
  expect((await env.as.viewer.get(`/v1/blueprints/${name}`)).body.blueprint.preemption).toBeNull();
});

test('an urgent lease preempts the lowest-priority lease: the victim is told at once, ends as system:preemption at its grace, and its slot goes to the urgent lease', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 3, graceMs: 2000 });
  const victim = await activeLease(env.as.user, name, { priority: 1 });
  const urgent = await waitingLease(env.as.admin, name, { priority: 5 });

  const ending = await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending ?? undefined);
  expect(ending.kind).toBe('preempted');
  expect(ending.reason).toMatch(new RegExp(`^preempted for lease ${urgent.id}: priority 5 against 1; team default at 1 of its share of 1; ran \\d+`));
  const told = await leaseOf(victim.id);
  expect(told.endBy).toBe(ending.at);
  // A renewal answers with the same end.
  const renewed = await env.as.user.post(`/v1/leases/${victim.id}/commands?wait=30`, { kind: 'renew', payload: { expiresInMs: 60_000 } });
  expect(renewed.body.command.message).toContain(`ending by ${ending.at.replace('T', ' ')}: ${ending.reason}`);
  // The web UI's lease page says it, and why it ends by then.
  const web = new WebClient(env.server.url);
  expect((await web.signIn(env.as.viewer.token!)).status).toBe(303);
  const page = (await web.get(`/leases/${victim.id}`)).text;
  expect(page).toContain('<span class="muted">(preempted; stop the work and release it)</span>');
  expect(page).toContain(`<span class="muted">at the latest: preempted for lease ${urgent.id}: priority 5 against 1;`);
  // The urgent lease waits, saying for what.
  expect((await env.as.admin.get(`/v1/leases/${urgent.id}`)).body.lease.state).toBe('pending');

  await waitFor('the urgent lease to be active', async () => (await leaseOf(urgent.id)).state === 'active');
  const release = (await commandsOf(victim.id)).find((c) => c.kind === 'release');
  expect(release).toMatchObject({ issued_by: 'system:preemption', reason: ending.reason, message: 'released and destroyed' });
  expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(ending.at));
  expect((await leaseOf(urgent.id)).resourceId).toBe(victim.resourceId);
});

test('a victim whose holder releases it within the grace period ends as released by its holder, and the urgent lease gets its slot', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  const victim = await activeLease(env.as.user, name);
  const urgent = await waitingLease(env.as.user, name, { priority: 4 });
  await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending?.kind === 'preempted');
  const released = await env.as.user.post(`/v1/leases/${victim.id}/commands?wait=30`, { kind: 'release' });
  expect(released.status, JSON.stringify(released.body)).toBe(200);
  await waitFor('the urgent lease to be active', async () => (await leaseOf(urgent.id)).state === 'active');
  const release = (await commandsOf(victim.id)).find((c) => c.kind === 'release');
  expect(release?.issued_by).not.toMatch(/^system:/);
});

test('the preemption is withdrawn when the lease it was for goes away: the victim is told, and keeps its slot', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  const victim = await activeLease(env.as.user, name);
  const urgent = await waitingLease(env.as.user, name, { priority: 4 });
  await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending?.kind === 'preempted');
  expect((await env.as.user.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  await waitFor('the victim to be told it stays', async () => (await leaseOf(victim.id)).ending === null);
  const after = await leaseOf(victim.id);
  expect(after).toMatchObject({ state: 'active', endBy: null });
  const withdrawn = (await commandsOf(victim.id)).find((c) => c.kind === 'withdraw_ending');
  expect(withdrawn?.message).toMatch(/^no longer ending by .*: the preemption is withdrawn: lease \d+, which it was for, no longer waits$/);
  const rows = await env.database.db.selectFrom('preemptions').select('victim_lease_id').where('victim_lease_id', '=', victim.id).execute();
  expect(rows).toEqual([]);
});

test('a victim whose renewals were capped at its end gets its term back when the preemption is withdrawn, so it is not released for an end that no longer stands', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  const victim = await activeLease(env.as.user, name, { expiresInMs: 3_600_000 });
  const urgent = await waitingLease(env.as.user, name, { priority: 4 });
  const ending = await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending ?? undefined);
  const capped = await env.as.user.post(`/v1/leases/${victim.id}/commands?wait=30`, { kind: 'renew' });
  expect(capped.body.command.message).toContain('(capped: the lease ends by then)');
  expect((await leaseOf(victim.id)).expiresAt).toBe(ending.at);

  expect((await env.as.user.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  await waitFor('the victim to be told it stays', async () => (await leaseOf(victim.id)).ending === null);
  const after = await leaseOf(victim.id);
  // Its term (an hour) from the withdrawal, well past the end it was told (ten minutes).
  expect(Date.parse(after.expiresAt) - Date.parse(ending.at)).toBeGreaterThan(3_000_000);
  const withdrawn = (await commandsOf(victim.id)).find((c) => c.kind === 'withdraw_ending');
  expect(withdrawn?.message).toContain(`; expires ${after.expiresAt.replace('T', ' ')}`);
});

test('no preemption without the margin, nor of a lease created not preemptible (within its allowance)', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 3, graceMs: 600_000, protectedPerTeam: 1 });
  const held = await activeLease(env.as.user, name, { priority: 2 });
  // 4 against 2: below the margin of 3.
  const close = await waitingLease(env.as.user, name, { priority: 4 });
  // The line has been decided on: the victim was told nothing.
  await waitFor('it to wait', async () => {
    const rows = await env.database.db.selectFrom('blueprint_waiters').select('lease_id').where('lease_id', '=', close.id).execute();
    return rows.length === 1;
  });
  expect((await leaseOf(held.id)).ending).toBeNull();
  expect((await env.as.user.post(`/v1/leases/${close.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  expect((await env.as.user.post(`/v1/leases/${held.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);

  // Not preemptible: within the team's allowance of 1, never chosen; beyond it, refused at once.
  const kept = await activeLease(env.as.user, name, { preemptible: false });
  expect(kept.preemptible).toBe(false);
  const second = await env.as.user.post('/v1/leases', { blueprint: name, preemptible: false });
  expect(second.status).toBe(429);
  expect(second.body.message).toMatch(new RegExp(`^team default may have 1 lease\\(s\\) at ${name} that cannot be preempted .*and has 1`));
  const urgent = await waitingLease(env.as.admin, name, { priority: 9 });
  await waitFor('the urgent lease to wait', async () => {
    const rows = await env.database.db.selectFrom('blueprint_waiters').select('lease_id').where('lease_id', '=', urgent.id).execute();
    return rows.length === 1;
  });
  expect((await leaseOf(kept.id)).ending).toBeNull();
  expect((await env.as.admin.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  expect((await env.as.user.post(`/v1/leases/${kept.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test('turning preemption off withdraws the preemptions under way', async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  const victim = await activeLease(env.as.user, name);
  const urgent = await waitingLease(env.as.user, name, { priority: 4 });
  await waitFor('the victim to be told', async () => (await leaseOf(victim.id)).ending?.kind === 'preempted');
  expect((await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { preemption: null } })).status).toBe(200);
  await waitFor('the victim to be told it stays', async () => (await leaseOf(victim.id)).ending === null);
  const withdrawn = (await commandsOf(victim.id)).find((c) => c.kind === 'withdraw_ending');
  expect(withdrawn?.message).toContain(`blueprint ${name} preempts no more`);
  expect((await leaseOf(urgent.id)).state).toBe('pending');
  expect((await env.as.user.post(`/v1/leases/${urgent.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  expect((await env.as.user.post(`/v1/leases/${victim.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test("a team's quota counts the preemptions under way for it: no victim for a lease the quota would hold back", async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 1, graceMs: 600_000 });
  expect((await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 3 } })).status).toBe(200);
  const team = `urgent-${name}`;
  expect((await env.as.admin.post(`/v1/teams/${team}`, {})).status).toBe(200);
  expect((await env.as.admin.post(`/v1/teams/${team}/quotas`, { blueprint: name, maxLeases: 1 })).status).toBe(200);
  const { secret } = await createToken(env.database.db, { name: `${team}-operator`, role: 'operator', team }, 'test');
  const urgentTeam = env.as.admin.withToken(secret);
  const victims = [await activeLease(env.as.user, name), await activeLease(env.as.user, name), await activeLease(env.as.user, name)];
  const urgents = [await waitingLease(urgentTeam, name, { priority: 5 }), await waitingLease(urgentTeam, name, { priority: 5 })];
  await waitFor('both urgent leases in line', async () => {
    const rows = await env.database.db
      .selectFrom('blueprint_waiters')
      .select('lease_id')
      .where(
        'lease_id',
        'in',
        urgents.map((u) => u.id),
      )
      .execute();
    return rows.length === 2;
  });
  // One slot is all the quota lets the team have: one victim.
  const told = (await Promise.all(victims.map((v) => leaseOf(v.id)))).filter((v) => v.ending !== null);
  expect(told).toHaveLength(1);
  for (const u of urgents) expect((await urgentTeam.post(`/v1/leases/${u.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
  for (const v of victims) expect((await env.as.user.post(`/v1/leases/${v.id}/commands?wait=30`, { kind: 'release' })).status).toBe(200);
});

test("a limit raised while the line waits to look again at a victim's minimum runtime serves the line at once", async () => {
  const name = await preemptingSlot(env.as.admin, { priorityMargin: 2, minRuntimeMs: 3_600_000 });
  await activeLease(env.as.user, name, { priority: 0 });
  // It may preempt only once the holder has run an hour: the line is to be looked at again then.
  const urgent = await waitingLease(env.as.user, name, { priority: 4 });
  const lookAgain = () =>
    env.database.db
      .selectFrom('commands')
      .select(['id', 'not_before'])
      .where('target_kind', '=', 'blueprint')
      .where('kind', '=', 'serve_waiters')
      .where('status', '=', 'queued')
      .execute();
  await waitFor('the look again queued for the minimum runtime', async () => (await lookAgain()).length === 1);
  expect((await lookAgain())[0]!.not_before.getTime()).toBeGreaterThan(Date.now() + 3_000_000);

  const raised = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxResources: 2 } });
  expect(raised.status, JSON.stringify(raised.body)).toBe(200);
  await waitFor('the urgent lease served from the room the raise made', async () => (await leaseOf(urgent.id)).state === 'active', 15_000);
});
