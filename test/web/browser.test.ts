import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { isSettled } from '../../src/read/settled.ts';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { TEST_GC } from '../gc/support/handDrain.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { launchBrowser, screenshot, signedInContext } from './support/browser.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { operatorLease, releaseCommands } from './support/webFixtures.ts';

const env = apiTestEnv();
let browser: Browser;

beforeAll(async () => {
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
});

/**
 * The driver takes a while to release, so "releasing…" is there to be seen
 * after the redirect and the page's load, and two presses land while it is
 * in flight, even on a loaded machine where those take seconds.
 */
const SLOW_RELEASE = { operationLatencyMs: { releaseLease: 5000 } };

const heading = (page: Page) => page.locator('h1').innerText();

/** Waits for the page to show its lease destroyed: the state itself, not the goal the heading names while a release is on its way ("active → destroyed"). */
const destroyedShown = (page: Page) =>
  page.waitForFunction(() => document.querySelector('h1')?.textContent?.includes('destroyed') && !document.querySelector('.goal'), null, {
    timeout: 30_000,
  });

describe('in a browser', () => {
  test('sign in, open a lease, press release: the page follows it to released and destroyed without a reload', async () => {
    const lease = await operatorLease(env, SLOW_RELEASE);
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!);
    const page = await context.newPage();
    await page.goto('/');
    expect(await page.locator('main').innerText()).toContain(lease.blueprint);
    await screenshot(page, 'overview-first');

    await page.goto(`/leases/${lease.id}`);
    expect(await heading(page)).toContain('active');
    // Times read relative to now, the exact UTC time to the millisecond on hover.
    const created = page.locator('dt:has-text("Created") + dd time');
    expect(await created.innerText()).toMatch(/^\d+(\.\d)? (s|min) ago$/);
    expect(await created.getAttribute('title')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$/);
    await screenshot(page, 'lease-active');
    await page.fill('input[name=reason]', 'finished the build');
    await Promise.all([page.waitForURL(/outcome=queued/), page.click('button[data-kind=release]')]);

    // Landed on the page after the redirect: mark it, so a reload would show.
    await page.evaluate(() => Object.assign(window, { notReloaded: true }));
    expect(await page.locator('button[data-kind=release]').innerText()).toBe('releasing…');
    expect(await page.locator('button[data-kind=release]').isDisabled()).toBe(true);
    await screenshot(page, 'lease', { forReadme: true });

    await destroyedShown(page);
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    const timeline = await page.locator('table.timeline').innerText();
    expect(timeline).toMatch(/active\s*→\s*released/);
    expect(timeline).toMatch(/released\s*→\s*destroyed/);
    expect(timeline).toContain('finished the build');
    // One event stream for the page, however many updates it received.
    const streams = await page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/events')).length);
    expect(streams).toBeLessThanOrEqual(1);

    // Destroyed: the button stays, disabled, saying why.
    const button = page.locator('button[data-kind=release]');
    expect(await button.isDisabled()).toBe(true);
    expect(await button.getAttribute('title')).toContain('a destroyed lease takes no release');
    await page.reload();
    expect(await page.locator('button[data-kind=release]').isDisabled()).toBe(true);
    await screenshot(page, 'lease-destroyed');

    const [release] = await releaseCommands(env, lease.id);
    await page.goto(`/commands/${release!.id}`);
    expect(await page.locator('main').innerText()).toContain('What it caused');
    await screenshot(page, 'command');
    for (const list of ['leases', 'resources', 'commands', 'blueprints']) {
      await page.goto(`/${list}`);
      await screenshot(page, `list-${list}`);
    }
    await context.close();
  });

  test('two tabs pressing release at once make one release; the other joins it', async () => {
    // "At once" is while the first release is in flight.
    const lease = await operatorLease(env, SLOW_RELEASE);
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!);
    // No live updates here: one tab's release would otherwise turn the other
    // tab's button into "releasing…" before a slow click lands, and this is
    // about two presses that did happen at once (the first test follows the
    // live page).
    await context.route('**/events', (route) => route.abort());
    const tabs = await Promise.all([context.newPage(), context.newPage()]);
    await Promise.all(tabs.map((tab) => tab.goto(`/leases/${lease.id}`)));
    await Promise.all(tabs.map((tab) => Promise.all([tab.waitForURL(/outcome=/), tab.click('button[data-kind=release]')])));

    const releases = await releaseCommands(env, lease.id);
    const real = releases.filter((r) => r.coalesced_into === null);
    expect(real).toHaveLength(1);
    expect(releases.filter((r) => r.coalesced_into !== null).every((r) => r.coalesced_into === real[0]!.id)).toBe(true);
    const outcomes = tabs.map((tab) => new URL(tab.url()).searchParams);
    expect(outcomes.map((o) => o.get('command'))).toEqual([String(real[0]!.id), String(real[0]!.id)]);
    expect(outcomes.map((o) => o.get('outcome')).sort()).toEqual(['joined', 'queued']);
    await context.close();
  });

  test('a double click queues one release', async () => {
    const lease = await operatorLease(env, SLOW_RELEASE);
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!);
    const page = await context.newPage();
    await page.goto(`/leases/${lease.id}`);
    await Promise.all([page.waitForURL(/outcome=/), page.dblclick('button[data-kind=release]')]);
    const releases = await releaseCommands(env, lease.id);
    expect(releases.filter((r) => r.coalesced_into === null)).toHaveLength(1);
    // Its slow release ends here, not in the tests after this one.
    await waitFor('the release to settle', async () => (await releaseCommands(env, lease.id)).every((r) => isSettled(r.status)));
    await context.close();
  });

  test("releasing a resource that holds someone's lease asks first; declining sends nothing", async () => {
    const lease = await operatorLease(env);
    const { resourceId } = lease;
    const resourceReleases = () =>
      env.database.db
        .selectFrom('commands')
        .select('id')
        .where('target_kind', '=', 'resource')
        .where('target_id', '=', resourceId)
        .where('kind', '=', 'release')
        .execute();
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!);
    const page = await context.newPage();
    await page.goto(`/resources/${resourceId}`);
    const asked: string[] = [];
    let answer = false;
    page.on('dialog', (dialog) => {
      asked.push(dialog.message());
      void (answer ? dialog.accept() : dialog.dismiss());
    });
    await page.click('button[data-kind=release]');
    expect(asked).toEqual([`Release resource ${resourceId}? Its lease is released first, whoever holds it.`]);
    // Declined: still on the page, the form not spent, nothing queued.
    expect(page.url()).not.toMatch(/outcome=/);
    expect(await page.locator('button[data-kind=release]').isDisabled()).toBe(false);
    expect(await resourceReleases()).toEqual([]);

    answer = true;
    await Promise.all([page.waitForURL(/outcome=queued/), page.click('button[data-kind=release]')]);
    expect(asked).toHaveLength(2);
    expect(await resourceReleases()).toHaveLength(1);
    await context.close();
  });

  test('on a phone, a lease page has its Release button above the fold and its timeline within the screen', async () => {
    const lease = await operatorLease(env);
    await env.as.operator.post(`/v1/leases/${lease.id}/commands`, { kind: 'renew', reason: 'a timeline entry with a reason' });
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!, { width: 390, height: 844 });
    const page = await context.newPage();
    await page.goto(`/leases/${lease.id}`);
    const release = await page.locator('button[data-kind=release]').boundingBox();
    expect(release!.y + release!.height).toBeLessThanOrEqual(844);
    const timeline = await page.evaluate(() => {
      const table = document.querySelector('table.timeline')!;
      return { width: table.getBoundingClientRect().width, scrolls: table.parentElement!.scrollWidth > table.parentElement!.clientWidth };
    });
    expect(timeline.width).toBeLessThanOrEqual(390);
    expect(timeline.scrolls).toBe(false);
    await screenshot(page, 'lease-phone');
    await context.close();
  });

  test('on a phone, no page shows a table wider than the screen: its rows are cards of labelled lines', async () => {
    // A pool of one slot, held, with a lease waiting: the blueprint's waiting line and live resources both have rows.
    const { name, id: blueprintId } = await simulatedBlueprint(env.as.admin, {}, { maxResources: 1, leasesPerResource: 1 });
    const held = await activeLease(env.as.operator, name);
    const waiting = await env.as.operator.post('/v1/leases', { blueprint: name, reason: 'waits for the one slot' });
    expect(waiting.status, JSON.stringify(waiting.body)).toBe(202);
    await env.as.admin.post('/v1/teams/default/quotas', { blueprint: name, maxLeases: 5 });
    const release = await env.as.operator.post(`/v1/leases/${held.id}/commands?wait=0`, { kind: 'renew' });
    const context = await signedInContext(browser, env.server.url, env.as.admin.token!, { width: 390, height: 844 });
    const page = await context.newPage();
    const paths = ['/', '/blueprints', '/leases', '/resources', '/commands', '/teams', `/blueprints/${blueprintId}`, `/resources/${held.resourceId}`];
    paths.push(`/commands/${release.body.command.id}`, `/leases/${waiting.body.lease.id}`);
    let checked = 0;
    for (const path of paths) {
      await page.goto(path);
      const tables = await page.evaluate(() =>
        [...document.querySelectorAll('main table')].map((table) => ({
          cells: table.querySelectorAll('td').length,
          right: Math.max(...[...table.querySelectorAll('td, th')].map((cell) => cell.getBoundingClientRect().right), 0),
          scrolls: table.parentElement!.scrollWidth > table.parentElement!.clientWidth,
        })),
      );
      checked += tables.length;
      for (const table of tables) {
        expect(table.cells, path).toBeGreaterThan(0);
        expect(table.right, path).toBeLessThanOrEqual(390);
        expect(table.scrolls, path).toBe(false);
      }
    }
    // Every list, the waiting line, live resources, teams, slots, a queue and timelines.
    expect(checked).toBeGreaterThanOrEqual(10);
    await page.goto(`/blueprints/${blueprintId}`);
    // Each cell says which column it is.
    expect(await page.locator('table.data td[data-label="Active in"]').count()).toBeGreaterThan(0);
    await screenshot(page, 'blueprint-phone');
    await context.close();
  });

  test('a viewer sees no buttons, and its forged posts are refused and write nothing', async () => {
    const lease = await operatorLease(env);
    const context = await signedInContext(browser, env.server.url, env.as.viewer.token!, { width: 390, height: 844 });
    const page = await context.newPage();
    await page.goto(`/leases/${lease.id}`);
    expect(await page.locator('main button').count()).toBe(0);
    await screenshot(page, 'lease-viewer-phone');

    const statuses = await page.evaluate(async (id) => {
      const csrf = document.querySelector<HTMLInputElement>('input[name=_csrf]')!.value;
      const post = (fields: Record<string, string>) =>
        fetch(`/leases/${id}/commands`, { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' }).then((r) => r.status);
      return [await post({ _csrf: csrf, kind: 'release' }), await post({ kind: 'release' })];
    }, lease.id);
    expect(statuses).toEqual([403, 403]);
    expect(await releaseCommands(env, lease.id)).toEqual([]);
    await context.close();
  });

  test("the overview and a blueprint's page chart the collector's samples, and a release shows in the next one", async () => {
    // The worker's own scheduled pass may be running: ours is then skipped
    // ("another collector pass was running"), and asked for again, so each
    // `pass()` takes a sample of its own.
    const pass = () =>
      waitFor(
        'a collector pass of the test, not skipped',
        async () => (await runCollectorPass(env.database, TEST_GC, 'cli', testLog)).status === 'done',
      );
    /** How many collector samples have been taken so far. */
    const samples = async () =>
      Number(
        (
          await env.database.db
            .selectFrom('usage_samples')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    await pass();
    // Slow to release, so the page shows the release on its way for seconds before the lease is destroyed.
    const lease = await operatorLease(env, SLOW_RELEASE);
    const { id: blueprintId } = await env.database.db
      .selectFrom('blueprints')
      .select('id')
      .where('name', '=', lease.blueprint)
      .executeTakeFirstOrThrow();
    await pass();
    const context = await signedInContext(browser, env.server.url, env.as.operator.token!);
    const page = await context.newPage();
    await page.goto(`/leases/${lease.id}`);
    const sampledBeforeRelease = await samples();
    await Promise.all([page.waitForURL(/outcome=queued/), page.click('button[data-kind=release]')]);
    await destroyedShown(page);
    await pass();

    const values = async (chart: string, series: string) =>
      (await page.locator(`[data-chart="${chart}"] [data-series="${series}"]`).getAttribute('data-values'))!.split(',');
    await page.goto(`/blueprints/${blueprintId}`);
    // Active in the sample before the release, gone in the one after it.
    const active = await values('leases', 'active');
    expect(active.at(-1)).toBe('0');
    expect(active).toContain('1');
    // Its wait (created → active) was sampled once it was active.
    expect((await values('waits', 'p50')).some((v) => v !== '' && Number(v) >= 0)).toBe(true);
    const drawn = await page.locator('[data-chart="leases"] svg').boundingBox();
    expect(drawn!.width).toBeGreaterThan(100);
    expect(await page.locator('[data-chart="leases"] [data-series="active"] polyline').count()).toBeGreaterThan(0);
    await screenshot(page, 'blueprint-charts');

    await page.goto('/');
    // The worker's own scheduled pass may sample between the release and ours:
    // the release's commands show in one of the samples taken since it.
    const sinceRelease = (await samples()) - sampledBeforeRelease;
    expect((await values('commands', 'appended')).slice(-sinceRelease).some((v) => Number(v) > 0)).toBe(true);
    expect(await page.locator('[data-chart]').count()).toBe(4);
    await context.close();
  });

  test("the overview counts every blueprint's resources and leases by state, and refreshes itself", async () => {
    const context = await signedInContext(browser, env.server.url, env.as.admin.token!);
    const page = await context.newPage();
    await page.goto('/');
    const cards = page.locator('section.card');
    // A card per blueprint the earlier tests made.
    const blueprints = (await env.database.db.selectFrom('blueprints').select('id').execute()).length;
    expect(await cards.count()).toBe(blueprints);
    expect(await page.locator('main').innerText()).toMatch(/destroyed\s*1/);
    // A change anywhere refreshes it within a few seconds (lists and the overview are debounced).
    const lease = await operatorLease(env);
    await page.waitForFunction((n) => document.querySelectorAll('section.card').length === n, blueprints + 1, { timeout: 15_000 });
    await screenshot(page, 'overview', { forReadme: true });
    expect(lease.id).toBeGreaterThan(0);
    await context.close();
  });
});
