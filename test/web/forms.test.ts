import { describe, expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { simulatedBlueprint } from '../api/support/fixtures.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { operatorLease, releaseCommands } from './support/webFixtures.ts';
import { WebClient } from './support/WebClient.ts';

const env = apiTestEnv();

async function signedIn(role: 'viewer' | 'user' | 'operator' | 'admin'): Promise<WebClient> {
  const client = new WebClient(env.server.url);
  const answer = await client.signIn(env.as[role].token!);
  expect(answer.status).toBe(303);
  return client;
}

/** Commands the web has queued. Not all commands: earlier tests' drains may still be adding their follow-ups (source `system`). */
async function commandCount(): Promise<number> {
  const row = await env.database.db
    .selectFrom('commands')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('source', '=', 'web')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

describe('sign-in and sessions', () => {
  test('a page without a session sends the browser to sign in, and back after', async () => {
    const client = new WebClient(env.server.url);
    const page = await client.get('/leases?state=active');
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/sign-in?next=%2Fleases%3Fstate%3Dactive');
    const form = await client.get('/sign-in?next=%2Fleases%3Fstate%3Dactive');
    const answer = await client.post('/sign-in', {
      _csrf: /name="_csrf" value="([^"]*)"/.exec(form.text)![1]!,
      token: env.as.viewer.token!,
      next: '/leases?state=active',
    });
    expect(answer.status).toBe(303);
    expect(answer.headers.get('location')).toBe('/leases?state=active');
  });

  test('the session cookie is HttpOnly and SameSite=Strict, and its id is stored only hashed', async () => {
    const client = new WebClient(env.server.url);
    const form = await client.get('/sign-in');
    const answer = await client.post('/sign-in', { _csrf: /name="_csrf" value="([^"]*)"/.exec(form.text)![1]!, token: env.as.viewer.token! });
    const cookie = answer.headers.getSetCookie().find((c) => c.startsWith('slipway_session='))!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).not.toMatch(/Secure/); // served over plain http here
    const id = decodeURIComponent(cookie.split(';')[0]!.split('=')[1]!);
    const rows = await env.database.db.selectFrom('web_sessions').select('id_sha256').execute();
    expect(rows.some((r) => r.id_sha256 === id)).toBe(false);
    expect(rows.length).toBeGreaterThan(0);
  });

  test('a wrong token is refused with the form again; a sign-in without the form token is a 403', async () => {
    const client = new WebClient(env.server.url);
    const bad = await client.signIn('slw_not-a-real-token-at-all-000000000');
    expect(bad.status).toBe(401);
    expect(bad.text).toContain('That token is unknown or revoked.');
    const forged = await new WebClient(env.server.url).post('/sign-in', { _csrf: 'guess', token: env.as.admin.token! });
    expect(forged.status).toBe(403);
    expect(forged.headers.get('set-cookie') ?? '').not.toContain('slipway_session');
  });

  test('sign-out ends the session on the server', async () => {
    const client = await signedIn('viewer');
    expect((await client.get('/')).status).toBe(200);
    expect((await client.post('/sign-out')).status).toBe(303);
    expect((await client.get('/')).status).toBe(303);
  });

  test('a next path pointing elsewhere is refused', async () => {
    const client = new WebClient(env.server.url);
    expect((await client.get('/sign-in?next=//evil.example/')).status).toBe(400);
  });
});

describe('buttons and forms', () => {
  test('release from the lease page: recorded as from the web, with its reason, and the page says so', async () => {
    const lease = await operatorLease(env);
    const client = await signedIn('operator');
    const page = await client.get(`/leases/${lease.id}`);
    expect(page.text).toMatch(/<button type="submit" name="kind" value="release"/);
    const answer = await client.post(`/leases/${lease.id}/commands`, { kind: 'release', reason: 'done with it' });
    expect(answer.status).toBe(303);
    const [release] = await releaseCommands(env, lease.id);
    expect(release).toMatchObject({ source: 'web', issued_by: 'token:operator', reason: 'done with it' });
    expect(answer.headers.get('location')).toBe(`/leases/${lease.id}?command=${release!.id}&outcome=queued`);
    const after = await client.get(answer.headers.get('location')!);
    expect(after.text).toContain(`Queued as <a href="/commands/${release!.id}">command ${release!.id}</a>; it is `);
    // The page refreshes itself at the same address: the notice follows the command to its end.
    await waitFor('the release to settle', async () => (await releaseCommands(env, lease.id))[0]!.status === 'done');
    const settled = await client.get(answer.headers.get('location')!);
    expect(settled.text).toContain(`Queued as <a href="/commands/${release!.id}">command ${release!.id}</a>; it is done: released and destroyed.`);
  });

  test('a second press joins the release in flight or is told which command did it: one release', async () => {
    const lease = await operatorLease(env, { operationLatencyMs: { releaseLease: 500 } });
    const client = await signedIn('operator');
    await client.get(`/leases/${lease.id}`);
    const answers = await Promise.all([1, 2, 3].map(() => client.post(`/leases/${lease.id}/commands`, { kind: 'release' })));
    const outcomes = answers.map((a) => new URL(a.headers.get('location')!, 'http://x').searchParams.get('outcome'));
    expect(outcomes.filter((o) => o === 'queued')).toHaveLength(1);
    const releases = await releaseCommands(env, lease.id);
    expect(releases.filter((r) => r.coalesced_into === null)).toHaveLength(1);
    const commandIds = new Set(answers.map((a) => new URL(a.headers.get('location')!, 'http://x').searchParams.get('command')));
    expect(commandIds.size).toBe(1);
  });

  test('a reason with markup is shown as text, never run', async () => {
    const lease = await operatorLease(env);
    const client = await signedIn('operator');
    await client.get(`/leases/${lease.id}`);
    await client.post(`/leases/${lease.id}/commands`, { kind: 'release', reason: '<script>alert("x")</script><img src=x onerror=alert(1)>' });
    const page = await client.get(`/leases/${lease.id}`);
    expect(page.text).not.toContain('<script>alert');
    expect(page.text).not.toContain('<img src=x');
    expect(page.text).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const list = await client.get('/commands?source=web');
    expect(list.text).toContain('&lt;script&gt;');
    expect(list.text).not.toContain('<script>alert');
  });

  test("forged posts write nothing: without a CSRF token, with another session's, from another origin, and by a viewer", async () => {
    const lease = await operatorLease(env);
    const operator = await signedIn('operator');
    const viewer = await signedIn('viewer');
    const before = await commandCount();

    const noToken = await operator.post(`/leases/${lease.id}/commands`, { _csrf: '', kind: 'release' });
    expect(noToken.status).toBe(403);
    expect(noToken.text).toContain('CSRF');
    const othersToken = await operator.post(`/leases/${lease.id}/commands`, { _csrf: viewer.csrf!, kind: 'release' });
    expect(othersToken.status).toBe(403);
    const crossOrigin = await operator.post(`/leases/${lease.id}/commands`, { kind: 'release' }, { origin: 'https://evil.example' });
    expect(crossOrigin.status).toBe(403);

    const viewerPage = await viewer.get(`/leases/${lease.id}`);
    expect(viewerPage.text).not.toContain('<button type="submit" name="kind"');
    const withValidToken = await viewer.post(`/leases/${lease.id}/commands`, { kind: 'release' });
    expect(withValidToken.status).toBe(403);
    expect(withValidToken.text).toContain('a viewer token may not send commands to leases');
    const withoutToken = await viewer.post(`/leases/${lease.id}/commands`, { _csrf: 'x', kind: 'release' });
    expect(withoutToken.status).toBe(403);
    const signedOut = await new WebClient(env.server.url).post(`/leases/${lease.id}/commands`, { kind: 'release' });
    expect(signedOut.status).toBe(401);

    expect(await commandCount()).toBe(before);
    expect(await releaseCommands(env, lease.id)).toEqual([]);
  });

  test('a user may release only leases it holds; the button shows only there', async () => {
    const lease = await operatorLease(env);
    const user = await signedIn('user');
    const page = await user.get(`/leases/${lease.id}`);
    expect(page.text).not.toContain('value="release"');
    const answer = await user.post(`/leases/${lease.id}/commands`, { kind: 'release' });
    expect(answer.status).toBe(403);
    expect(await releaseCommands(env, lease.id)).toEqual([]);
  });

  test('a destroyed lease shows its release button disabled, and a late post is told which command did it', async () => {
    const lease = await operatorLease(env);
    const client = await signedIn('operator');
    await client.get(`/leases/${lease.id}`);
    await client.post(`/leases/${lease.id}/commands`, { kind: 'release' });
    await waitFor(
      'the lease destroyed',
      async () =>
        (await env.database.db.selectFrom('leases').select('state').where('id', '=', lease.id).executeTakeFirstOrThrow()).state === 'destroyed',
    );
    const page = await client.get(`/leases/${lease.id}`);
    expect(page.text).toMatch(/value="release" data-kind="release" class="danger" disabled title="a destroyed lease takes no release/);
    const late = await client.post(`/leases/${lease.id}/commands`, { kind: 'release' });
    const [release] = await releaseCommands(env, lease.id);
    expect(late.headers.get('location')).toBe(`/leases/${lease.id}?command=${release!.id}&outcome=done`);
  });

  test('cancel on a queued command, from its page', async () => {
    const lease = await operatorLease(env);
    await env.stopWorker();
    try {
      const client = await signedIn('operator');
      await client.get(`/leases/${lease.id}`);
      const queued = await client.post(`/leases/${lease.id}/commands`, { kind: 'release' });
      const id = new URL(queued.headers.get('location')!, 'http://x').searchParams.get('command')!;
      const page = await client.get(`/commands/${id}`);
      expect(page.text).toContain(`action="/commands/${id}/cancel"`);
      const cancelled = await client.post(`/commands/${id}/cancel`, { reason: 'changed my mind' });
      expect(cancelled.status).toBe(303);
      const row = await env.database.db.selectFrom('commands').select(['status', 'message']).where('id', '=', Number(id)).executeTakeFirstOrThrow();
      expect(row).toEqual({ status: 'cancelled', message: 'cancelled by token:operator: changed my mind' });
      const after = await client.get(`/commands/${id}`);
      expect(after.text).not.toContain(`action="/commands/${id}/cancel"`);
    } finally {
      await env.startWorker();
    }
  });
});

describe('resource buttons', () => {
  test('while a command is under way its button is busy, the other buttons are not, and the page says where it is heading', async () => {
    const lease = await operatorLease(env);
    const { resourceId } = lease;
    await env.stopWorker();
    try {
      const client = await signedIn('operator');
      await client.get(`/resources/${resourceId}`);
      expect((await client.post(`/resources/${resourceId}/commands`, { kind: 'reclaim' })).status).toBe(303);
      const resourcePage = await client.get(`/resources/${resourceId}`);
      expect(resourcePage.text).toMatch(/<button type="button" disabled class="busy" data-kind="reclaim">reclaiming…<\/button>/);
      // Releasing the resource would end the lease on it too: the button says so before it is sent.
      expect(resourcePage.text).toMatch(
        /name="kind" value="release" data-kind="release" class="danger" data-confirm="Release resource \d+\? Its lease is released first, whoever holds it.">Release</,
      );
      expect(resourcePage.text).toMatch(/<span class="goal">→ <span class="badge badge-destroyed[ "]/);
      await client.get(`/leases/${lease.id}`);
      expect((await client.post(`/leases/${lease.id}/commands`, { kind: 'release' })).status).toBe(303);
      const leasePage = await client.get(`/leases/${lease.id}`);
      expect(leasePage.text).toMatch(/<button type="button" disabled class="busy" data-kind="release">releasing…<\/button>/);
      expect(leasePage.text).toMatch(/<span class="goal">→ <span class="badge badge-destroyed[ "]/);
      expect(leasePage.text).toMatch(/<dt>Target state<\/dt><dd>destroyed<\/dd>/);
    } finally {
      await env.startWorker();
    }
  });

  test('an idle resource is reclaimed from its page, then shows both buttons disabled', async () => {
    const lease = await operatorLease(env);
    const { resourceId } = lease;
    await env.as.operator.post(`/v1/leases/${lease.id}/commands?wait=30`, { kind: 'release' });
    const client = await signedIn('operator');
    const page = await client.get(`/resources/${resourceId}`);
    // No lease on it: nobody else's work ends, so nothing to confirm.
    expect(page.text).toMatch(/name="kind" value="release" data-kind="release" class="danger">Release</);
    expect(page.text).toMatch(/name="kind" value="reclaim" data-kind="reclaim" class="danger">Reclaim</);
    const answer = await client.post(`/resources/${resourceId}/commands`, { kind: 'reclaim', reason: 'idle' });
    expect(answer.headers.get('location')).toMatch(new RegExp(`^/resources/${resourceId}\\?command=\\d+&outcome=queued$`));
    await waitFor(
      'the resource destroyed',
      async () =>
        (await env.database.db.selectFrom('resources').select('state').where('id', '=', resourceId).executeTakeFirstOrThrow()).state === 'destroyed',
    );
    const after = await client.get(`/resources/${resourceId}`);
    expect(after.text).toMatch(/value="release" data-kind="release" class="danger" disabled title="a destroyed resource takes no release/);
    expect(after.text).toMatch(/value="reclaim" data-kind="reclaim" class="danger" disabled title="a destroyed resource takes no reclaim/);
    // What no longer applies is gone: no reason box with no button to press, no deadlines on a destroyed lease.
    expect(page.text).toContain('name="reason"');
    expect(after.text).not.toContain('name="reason"');
    const leasePage = await client.get(`/leases/${lease.id}`);
    expect(leasePage.text).toContain('badge-destroyed');
    expect(leasePage.text).not.toContain('Heartbeat due');
    expect(leasePage.text).not.toContain('name="reason"');
    const user = await signedIn('user');
    expect((await user.get(`/resources/${resourceId}`)).text).not.toContain('data-kind="reclaim"');
    expect((await user.post(`/resources/${resourceId}/commands`, { kind: 'release' })).status).toBe(403);
  });

  test('cordon from a resource page puts it into maintenance, its lease carrying on; then only uncordon is offered of the two', async () => {
    const lease = await operatorLease(env);
    const { resourceId } = lease;
    const client = await signedIn('operator');
    const page = await client.get(`/resources/${resourceId}`);
    // Neither ends anything, so neither is red.
    expect(page.text).toMatch(/name="kind" value="cordon" data-kind="cordon">Cordon</);
    expect(page.text).toMatch(
      /name="kind" value="uncordon" data-kind="uncordon" disabled title="an active resource takes no uncordon \(only maintenance\)">Uncordon</,
    );
    const answer = await client.post(`/resources/${resourceId}/commands`, { kind: 'cordon', reason: 'firmware' });
    expect(answer.status).toBe(303);
    const stateOf = async (table: 'resources' | 'leases', id: number) =>
      (await env.database.db.selectFrom(table).select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;
    await waitFor('the resource in maintenance', async () => (await stateOf('resources', resourceId)) === 'maintenance');
    expect(await stateOf('leases', lease.id)).toBe('active');
    const after = await client.get(`/resources/${resourceId}`);
    expect(after.text).toMatch(/value="cordon" data-kind="cordon" disabled title="a maintenance resource takes no cordon \(only active\)"/);
    expect(after.text).toMatch(/name="kind" value="uncordon" data-kind="uncordon">Uncordon</);
    await client.post(`/resources/${resourceId}/commands`, { kind: 'uncordon' });
    await waitFor('the resource active again', async () => (await stateOf('resources', resourceId)) === 'active');
    // A page the release before served still posts the old name during a roll: taken, and appended as the new one.
    expect((await client.post(`/resources/${resourceId}/commands`, { kind: 'drain' })).status).toBe(303);
    await waitFor('the resource in maintenance again', async () => (await stateOf('resources', resourceId)) === 'maintenance');
    const fromTheWeb = await env.database.db
      .selectFrom('commands')
      .select(['kind', 'issued_by', 'reason'])
      .where('target_kind', '=', 'resource')
      .where('target_id', '=', resourceId)
      .where('source', '=', 'web')
      .orderBy('id')
      .execute();
    expect(fromTheWeb).toEqual([
      { kind: 'cordon', issued_by: 'token:operator', reason: 'firmware' },
      { kind: 'uncordon', issued_by: 'token:operator', reason: null },
      { kind: 'cordon', issued_by: 'token:operator', reason: null },
    ]);
  });
});

test('every page names its icon, served from memory like the other assets', async () => {
  const page = await (await signedIn('viewer')).get('/');
  expect(page.text).toContain('<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">');
  const icon = await fetch(`${env.server.url}/assets/favicon.svg`);
  expect(icon.status).toBe(200);
  expect(icon.headers.get('content-type')).toBe('image/svg+xml');
  expect(await icon.text()).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
});

test('a lease page shows its attributes, each value escaped', async () => {
  const { name } = await simulatedBlueprint(env.as.admin);
  const created = await env.as.operator.post('/v1/leases?wait=30', { blueprint: name, attributes: { team: 'ci', note: '<b>x</b>' } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const page = await (await signedIn('operator')).get(`/leases/${created.body.lease.id}`);
  expect(page.text).toContain('<li><code>team</code> = <code>&quot;ci&quot;</code></li>');
  expect(page.text).toContain('<li><code>note</code> = <code>&quot;&lt;b&gt;x&lt;/b&gt;&quot;</code></li>');
});

test('a waiting lease nothing can serve says so on its page and in the API, with no estimate', async () => {
  const { name } = await simulatedBlueprint(env.as.admin, { labels: { gpu: 'a100' } }, { maxResources: 1, leasesPerResource: 1 });
  const holder = await env.as.operator.post('/v1/leases?wait=30', { blueprint: name, selector: 'gpu=a100' });
  expect(holder.status, JSON.stringify(holder.body)).toBe(200);
  const waiter = (await env.as.operator.post('/v1/leases', { blueprint: name, selector: 'gpu=a100' })).body.lease.id;
  await waitFor(`lease ${waiter} in line`, async () => (await env.as.operator.get(`/v1/leases/${waiter}`)).body.line !== null);
  const relabelled = await env.as.admin.call('PATCH', `/v1/blueprints/${name}`, { body: { labels: { gpu: 't4' } } });
  expect(relabelled.status, JSON.stringify(relabelled.body)).toBe(200);

  const why = `no resource of blueprint ${name} can ever match selector gpu=a100: gpu=a100, but gpu is t4`;
  expect((await env.as.operator.get(`/v1/leases/${waiter}`)).body.line).toMatchObject({ position: 1, estimateSeconds: null, unservable: why });
  const page = (await (await signedIn('operator')).get(`/leases/${waiter}`)).text;
  expect(page).toContain(`<strong>it cannot be served</strong>: ${why}`);
  expect(page).not.toMatch(/no estimate|about \d+ min|under a minute/);
});

test('a lease waiting for capacity says so on its page, with how many wait ahead of it; the blueprint page shows the line', async () => {
  const { id: blueprintId, name } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
  const holder = await env.as.operator.post('/v1/leases?wait=30', { blueprint: name });
  expect(holder.status, JSON.stringify(holder.body)).toBe(200);
  const first = (await env.as.operator.post('/v1/leases', { blueprint: name })).body.lease.id;
  const second = (await env.as.operator.post('/v1/leases', { blueprint: name, waitTimeoutMs: 3_600_000 })).body.lease.id;
  const client = await signedIn('operator');
  const waiting = (id: number, place: string) =>
    waitFor(`lease ${id} shown ${place}`, async () =>
      new RegExp(`<dt>Waiting</dt><dd>for a free slot at ${name}: ${place}, since <time`).test((await client.get(`/leases/${id}`)).text),
    );
  await waiting(first, 'next in line');
  await waiting(second, '1 ahead');
  // The API gives the same place, with the estimate's basis.
  const detail = await env.as.operator.get(`/v1/leases/${second}`);
  expect(detail.body.line).toMatchObject({ blueprintName: name, position: 2, waiting: 2, basis: expect.any(String) });
  expect((await env.as.operator.get(`/v1/leases/${holder.body.lease.id}`)).body.line).toBeNull();
  // Only a lease with a wait deadline shows one, and only while it waits.
  expect((await client.get(`/leases/${second}`)).text).toMatch(
    /<dt>Wait deadline<\/dt><dd><time[^>]*>[^<]+<\/time> <span class="muted">not active by then, it is released/,
  );
  expect((await client.get(`/leases/${first}`)).text).not.toContain('Wait deadline');
  const holderPage = (await client.get(`/leases/${holder.body.lease.id}`)).text;
  expect(holderPage).not.toContain('<dt>Waiting</dt>');
  expect(holderPage).toContain(`<a href="/blueprints/${blueprintId}">${name}</a>`);

  const page = await client.get(`/blueprints/${blueprintId}`);
  expect(page.status).toBe(200);
  expect(page.text).toContain(`<h1>Blueprint ${name} `);
  expect(page.text).toMatch(/<dt>Limits<\/dt><dd>0–1 resources, 1 lease\(s\) each/);
  // The line in the order it is served, then the resource the holder's lease is on.
  const line = [...page.text.matchAll(/<tr><td[^>]*>(\d+)<\/td><td[^>]*><a href="\/leases\/(\d+)">/g)].map((m) => [Number(m[1]), Number(m[2])]);
  expect(line).toEqual([
    [1, first],
    [2, second],
  ]);
  expect(page.text).toContain('>Active in</th>');
  expect(page.text).toContain('>Team</th>');
  expect(page.text).toContain(`for the 1st: no basis yet: no lease was granted at ${name} while others waited.</p>`);
  expect(page.text).toContain(`<a href="/resources/${holder.body.lease.resourceId}">resource ${holder.body.lease.resourceId}</a>`);
  expect(page.text).toContain('<h2>Timeline</h2>');
  expect((await client.get('/blueprints/999999')).status).toBe(404);
});
