import { expect, test } from 'vitest';
import { LeaseEnding, SlipwayClient } from '../../src/client/index.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { NO_SCHEDULED_COLLECTOR } from '../cli/rowCounts.ts';
import { WebClient } from '../web/support/WebClient.ts';
import { renderLease } from '../../src/cli/views/leaseViews.ts';

/**
 * A blueprint's longest hold (maxHoldMs) through the API, with a real
 * worker: the lease's holder is told ahead (its `ending`), and then the
 * lease ends with the reason. No collector runs: the workers' timekeeper does it.
 */
const env = apiTestEnv({ worker: true, env: NO_SCHEDULED_COLLECTOR });

let pools = 0;
/** A simulated blueprint whose leases are held at most `maxHoldMs`. */
async function limitedPool(maxHoldMs: number): Promise<string> {
  const name = `limited-${++pools}`;
  const answer = await env.as.admin.post('/v1/blueprints', { name, driver: 'simulated', maxResources: 2, leasesPerResource: 2, maxHoldMs });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  expect(answer.body.maxHoldMs).toBe(maxHoldMs);
  return name;
}

const commandsOf = (id: number) =>
  env.database.db
    .selectFrom('commands')
    .select(['kind', 'issued_by', 'reason', 'message'])
    .where('target_kind', '=', 'lease')
    .where('target_id', '=', id)
    .orderBy('id')
    .execute();

test('maxHoldMs is validated, shown and changed (null: no limit)', async () => {
  const name = await limitedPool(60_000);
  const tooShort = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxHoldMs: 500 } });
  expect(tooShort.status).toBe(400);
  expect(tooShort.body.message).toMatch(/maxHoldMs: expected at least 1 s/);
  const changed = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxHoldMs: 7_200_000 } });
  expect(changed.status, JSON.stringify(changed.body)).toBe(200);
  expect((await env.as.viewer.get(`/v1/blueprints/${name}`)).body.blueprint.maxHoldMs).toBe(7_200_000);
  const removed = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { maxHoldMs: null } });
  expect(removed.status, JSON.stringify(removed.body)).toBe(200);
  expect((await env.as.viewer.get(`/v1/blueprints/${name}`)).body.blueprint.maxHoldMs).toBeNull();
});

test('a lease is told ahead (ending, in its detail and in a renewal answer), and then ends at its longest hold with the reason; expiries asked past it are capped', async () => {
  const name = await limitedPool(8000);
  const created = await env.as.user.post('/v1/leases?wait=60', { blueprint: name, expiresInMs: 3_600_000 });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const lease = created.body.lease;
  expect(lease.state).toBe('active');
  expect(Date.parse(lease.endBy) - Date.parse(lease.grantedAt)).toBe(8000);
  // The create asked for an hour: its expiry is the limit, and the grant says so.
  expect(lease.expiresAt).toBe(lease.endBy);
  expect(lease.ending).toBeNull();
  const grant = (await commandsOf(lease.id)).find((c) => c.kind === 'grant');
  expect(grant?.message).toMatch(
    new RegExp(`ends by .* at the latest \\(blueprint ${name}'s longest hold of 8s\\), so its expiry was brought back to then`),
  );

  // A renewal asking for an hour gets the limit, and says so.
  const renewed = await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'renew', payload: { expiresInMs: 3_600_000 } });
  expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
  expect(renewed.body.command.message).toMatch(/^renewed: expires .* \(capped: the lease ends by then\)$/);
  expect((await env.as.user.get(`/v1/leases/${lease.id}`)).body.lease.expiresAt).toBe(lease.endBy);

  const web = new WebClient(env.server.url);
  expect((await web.signIn(env.as.viewer.token!)).status).toBe(303);
  expect((await web.get(`/blueprints/${(await env.as.viewer.get(`/v1/blueprints/${name}`)).body.blueprint.id}`)).text).toContain(
    '<dt>Longest hold</dt><dd>8s from its grant, renewals included; its holder is told 800ms ahead</dd>',
  );

  // Told 800 ms ahead (a tenth of the hold).
  const reason = `reached blueprint ${name}'s longest hold of 8s`;
  const ending = await waitFor('the ending notice', async () => (await env.as.user.get(`/v1/leases/${lease.id}`)).body.lease.ending ?? undefined);
  expect(ending).toEqual({ kind: 'time_limit', at: lease.endBy, reason });
  // The web UI's lease page and `slipway lease show` say it.
  const page = await web.get(`/leases/${lease.id}`);
  expect(page.text).toContain(`<dt>Ending</dt><dd><strong>by`);
  expect(page.text).toContain(`${reason.replace("'", '&#39;')} <span class="muted">(time_limit; stop the work and release it)</span>`);
  const shown = renderLease((await env.as.user.get(`/v1/leases/${lease.id}`)).body.lease);
  expect(shown).toMatch(new RegExp(`ending +by ${lease.endBy.replace('T', ' ')}: ${reason} \\(time_limit\\)`));
  // A renewal now (the notice came 800 ms ahead) answers with it.
  const beat = await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'renew', payload: { expiresInMs: 60_000 } });
  expect(beat.status, JSON.stringify(beat.body)).toBe(200);
  expect(beat.body.command.message).toContain(`ending by ${lease.endBy.replace('T', ' ')}: ${reason}`);
  const notices = (await commandsOf(lease.id)).filter((c) => c.kind === 'notify_ending');
  expect(notices).toEqual([
    {
      kind: 'notify_ending',
      issued_by: 'system:deadline',
      reason: `ends by ${lease.endBy.replace('T', ' ')}: ${reason}`,
      message: `ending by ${lease.endBy.replace('T', ' ')}: ${reason}`,
    },
  ]);

  await waitFor('the lease to end', async () => (await env.as.user.get(`/v1/leases/${lease.id}`)).body.lease.state === 'destroyed');
  const release = (await commandsOf(lease.id)).find((c) => c.kind === 'release');
  expect(release).toMatchObject({ issued_by: 'system:deadline', reason, message: 'released and destroyed' });
});

test("withLease aborts the work's signal with LeaseEnding at the notice, and releases the lease as its holder once the work stops", async () => {
  // A notice two seconds ahead: the client looks at its lease every second.
  const name = await limitedPool(20_000);
  const client = new SlipwayClient({ baseUrl: env.server.url, token: env.as.user.token! });
  let id = 0;
  let stoppedBy: unknown;
  const failure = await client
    .withLease({ blueprint: name }, async ({ lease }, signal) => {
      id = lease.id;
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      stoppedBy = signal.reason;
    })
    .catch((error: unknown) => error);
  expect(stoppedBy).toBeInstanceOf(LeaseEnding);
  expect(failure).toBe(stoppedBy);
  expect((failure as LeaseEnding).ending).toMatchObject({ kind: 'time_limit', reason: `reached blueprint ${name}'s longest hold of 20s` });
  expect((failure as Error).message).toMatch(new RegExp(`^lease ${id} is ending by .*: reached blueprint ${name}'s longest hold of 20s$`));
  await waitFor('the lease to be destroyed', async () => (await env.as.user.get(`/v1/leases/${id}`)).body.lease.state === 'destroyed');
  // Its holder gave it back before its end: the release is the holder's, not the time limit's.
  expect((await commandsOf(id)).find((c) => c.kind === 'release')).toMatchObject({ issued_by: 'token:user', reason: 'the work is done' });
});
