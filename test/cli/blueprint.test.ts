import { expect, test } from 'vitest';
import { cliTestEnv } from './cliTestEnv.ts';
import { waitFor } from '../helpers/waitFor.ts';
import { parseJson } from './runCli.ts';

const env = cliTestEnv();

test("blueprint create prints the blueprint and stores its driver settings as given (the defaults stay the code's)", async () => {
  const run = await env.cli(
    'blueprint',
    'create',
    '--name',
    'sim',
    '--driver',
    'simulated',
    '--max-resources',
    '2',
    '--settings',
    '{"latencyMs":{"min":1,"max":5}}',
    '--setting',
    'transientFailureRate=0',
  );
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('blueprint sim (');
  expect(run.stdout).toMatch(/driver\s+simulated/);
  const row = await env.database.db.selectFrom('blueprints').selectAll().where('name', '=', 'sim').executeTakeFirstOrThrow();
  expect(row).toMatchObject({ driver: 'simulated', max_resources: 2, leases_per_resource: 1 });
  expect(row.settings).toEqual({ latencyMs: { min: 1, max: 5 }, transientFailureRate: 0 });
});

test('blueprint create --json prints the created row', async () => {
  const run = await env.cli(
    '--json',
    'blueprint',
    'create',
    '--name',
    'dirs',
    '--driver',
    'directory',
    '--max-resources',
    '3',
    '--leases-per-resource',
    '4',
    '--setting',
    'root=/tmp/slipway-cli-test',
  );
  expect(run.code).toBe(0);
  expect(parseJson(run)).toMatchObject({
    name: 'dirs',
    driver: 'directory',
    maxResources: 3,
    leasesPerResource: 4,
    settings: { root: '/tmp/slipway-cli-test' },
    state: 'enabled',
  });
});

test('blueprint list shows the newest first and pages on id', async () => {
  const first = await env.cli('blueprint', 'list', '--limit', '1');
  expect(first.code).toBe(0);
  expect(first.stdout).toMatch(/^ID\s+NAME\s+DRIVER/);
  expect(first.stdout).toContain('dirs');
  expect(first.stdout).not.toContain('sim');
  const page = parseJson(await env.cli('blueprint', 'list', '--limit', '1', '--json'));
  expect(page.items.map((b: { name: string }) => b.name)).toEqual(['dirs']);
  const next = parseJson(await env.cli('blueprint', 'list', '--after', String(page.next), '--json'));
  expect(next).toMatchObject({ items: [{ name: 'sim' }], next: null });
  const oldestFirst = parseJson(await env.cli('blueprint', 'list', '--order', 'oldest', '--json'));
  expect(oldestFirst.items.map((b: { name: string }) => b.name)).toEqual(['sim', 'dirs']);
});

test('blueprint show, by name or id, prints its fields, usage and timeline', async () => {
  const byName = await env.cli('blueprint', 'show', 'dirs');
  expect(byName.code).toBe(0);
  expect(byName.stdout).toMatch(/^blueprint dirs \(\d+\): enabled/);
  expect(byName.stdout).toMatch(/settings\s+\{"root":"\/tmp\/slipway-cli-test"\}/);
  expect(byName.stdout).toMatch(/waiting leases\s+0/);
  // The creation event, with who asked and from where.
  expect(byName.stdout).toMatch(/created enabled\s+\[\S+@\S+ via cli\] — created with driver directory/);
  const id = parseJson(await env.cli('blueprint', 'show', 'dirs', '--json')).blueprint.id;
  const byId = parseJson(await env.cli('blueprint', 'show', String(id), '--json'));
  expect(byId).toMatchObject({ blueprint: { name: 'dirs' }, queue: [], timeline: { entries: [{ type: 'event', event: 'created' }] } });
});

test('exit codes say what went wrong: usage 2, not found 3, conflict 4', async () => {
  expect((await env.cli('blueprint', 'create', '--name', 'x', '--driver', 'ftp', '--max-resources', '1')).code).toBe(2);
  const missing = await env.cli('blueprint', 'show', 'nosuch');
  expect(missing).toMatchObject({ code: 3, stderr: 'error: blueprint nosuch does not exist\n' });
  expect((await env.cli('blueprint', 'create', '--name', 'sim', '--driver', 'simulated', '--max-resources', '1')).code).toBe(4);
});

test('blueprint create and limits take --max-hold; show and list say it', async () => {
  const created = parseJson(
    await env.cli('--json', 'blueprint', 'create', '--name', 'timed', '--driver', 'simulated', '--max-resources', '1', '--max-hold', '90m'),
  );
  expect(created.maxHoldMs).toBe(5_400_000);
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'timed', '--max-hold', '2h'))).toMatchObject({ maxHoldMs: 7_200_000 });
  expect((await env.cli('blueprint', 'show', 'timed')).stdout).toMatch(
    /longest hold +2h from its grant, renewals included; its holder is told 5m ahead/,
  );
  expect((await env.cli('blueprint', 'list')).stdout).toMatch(/LONGEST HOLD[\s\S]*timed.* 2h /);
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'timed', '--max-hold', 'off'))).toMatchObject({ maxHoldMs: null });
  expect((await env.cli('blueprint', 'show', 'timed')).stdout).toMatch(/longest hold +no limit/);
});

test('blueprint limits, disable and enable change the blueprint as the API does, recording who asked', async () => {
  const limits = parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--max-resources', '5', '--leases-per-resource', '2'));
  expect(limits).toMatchObject({ name: 'dirs', maxResources: 5, leasesPerResource: 2 });
  const checked = parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--check-interval', '5m', '--clean-between-leases', 'on'));
  expect(checked).toMatchObject({ checkIntervalMs: 300_000, cleanBetweenLeases: true });
  const unchecked = parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--check-interval', 'off', '--clean-between-leases', 'off'));
  expect(unchecked).toMatchObject({ checkIntervalMs: null, cleanBetweenLeases: false });
  expect(unchecked.priorityStepMs).toBe(60_000);
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--priority-step', '30s'))).toMatchObject({ priorityStepMs: 30_000 });
  expect(unchecked.fairShareHalfLifeMs).toBe(3_600_000);
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--priority-step', 'off', '--fair-share-half-life', '30m'))).toMatchObject({
    priorityStepMs: 0,
    fairShareHalfLifeMs: 1_800_000,
  });
  const none = await env.cli('blueprint', 'limits', 'dirs');
  expect(none.code).toBe(2);
  expect(none.stderr).toBe(
    'error: give at least one of --max-resources <n>, --leases-per-resource <n>, --check-interval <duration|off>, --clean-between-leases <on|off>, --clean-attempts <n>, --priority-step <duration|off>, --max-hold <duration|off>, --fair-share-half-life <duration>, --preemption <on|off|settings>, --label <key=value>, --orphans <report|destroy>\n',
  );
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--preemption', 'margin=3,grace=2m'))).toMatchObject({
    preemption: { priorityMargin: 3, minRuntimeMs: 0, graceMs: 120_000, protectedPerTeam: 0 },
  });
  const unknown = await env.cli('blueprint', 'limits', 'dirs', '--preemption', 'margin=3,patience=1m');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain(
    'unknown preemption setting patience: expected on, off, or key=value pairs of margin, min-runtime, grace, protected',
  );
  const zero = await env.cli('blueprint', 'limits', 'dirs', '--preemption', 'margin=0');
  expect(zero.code).toBe(2);
  expect(zero.stderr).toContain('expected a margin of 1 to 9');
  expect(parseJson(await env.cli('--json', 'blueprint', 'limits', 'dirs', '--preemption', 'off'))).toMatchObject({ preemption: null });

  const disabled = await env.cli('blueprint', 'disable', 'dirs');
  expect(disabled.code).toBe(0);
  expect(disabled.stdout).toMatch(/^disabled blueprint dirs/);
  expect((await env.database.db.selectFrom('blueprints').select('state').where('name', '=', 'dirs').executeTakeFirstOrThrow()).state).toBe(
    'disabled',
  );
  expect(parseJson(await env.cli('--json', 'blueprint', 'enable', 'dirs'))).toMatchObject({ state: 'enabled' });

  // Each change is on the blueprint's timeline with the CLI's actor.
  const events = await env.database.db
    .selectFrom('events')
    .innerJoin('blueprints', 'blueprints.id', 'events.target_id')
    .select(['events.type', 'events.to_state'])
    .where('events.target_kind', '=', 'blueprint')
    .where('blueprints.name', '=', 'dirs')
    .where('events.source', '=', 'cli')
    .orderBy('events.id')
    .execute();
  expect(events).toEqual([
    { type: 'created', to_state: 'enabled' },
    { type: 'updated', to_state: null },
    { type: 'updated', to_state: null },
    { type: 'updated', to_state: null },
    { type: 'updated', to_state: null },
    { type: 'updated', to_state: null },
    // --preemption set, then off.
    { type: 'updated', to_state: null },
    { type: 'updated', to_state: null },
    { type: 'state', to_state: 'disabled' },
    { type: 'state', to_state: 'enabled' },
  ]);
});

test('durations and counts read as they were given: "15m", "every 1m30s", "1 resource of 1 slot"', async () => {
  const args = ['--driver', 'simulated', '--max-resources', '1', '--idle-timeout', '15m', '--check-interval', '90s'];
  const created = await env.cli('blueprint', 'create', '--name', 'worded', ...args);
  expect(created.code, created.stderr).toBe(0);
  const shown = await env.cli('blueprint', 'show', 'worded');
  expect(shown.stdout).toMatch(/idle timeout\s+15m\n/);
  expect(shown.stdout).toMatch(/checks\s+every 1m30s\n/);
  expect(shown.stdout).toMatch(/created with driver simulated, at most 1 resource of 1 slot/);
});

test('blueprint create and limits take --orphans; blueprint orphans lists what the last collector pass recorded', async () => {
  const created = await env.cli(
    'blueprint',
    'create',
    '--name',
    'held',
    '--driver',
    'simulated',
    '--max-resources',
    '1',
    '--settings',
    '{"holds": [{"id": "vm-by-hand", "attributes": {"ip": "10.0.0.9"}}]}',
  );
  expect(created.code).toBe(0);
  expect(created.stdout).toMatch(/orphans\s+report: reported/);
  // A blueprint whose driver lists nothing has none.
  expect((await env.cli('blueprint', 'orphans', 'sim')).stdout).toContain('blueprint sim: no orphans');

  // This pass, or the worker's scheduled one if it runs at the same moment (then this one is skipped), records it.
  expect((await env.cli('gc', 'run')).code).toBe(0);
  const listed = await waitFor('the orphan recorded', async () => {
    const run = await env.cli('blueprint', 'orphans', 'held');
    return run.stdout.includes('1 orphan(s)') ? run : undefined;
  });
  expect(listed.code).toBe(0);
  expect(listed.stdout).toMatch(/\nvm-by-hand\s+–?.*\{"ip":\s?"10\.0\.0\.9"\}\s+\d+\s/);
  expect(parseJson(await env.cli('--json', 'blueprint', 'orphans', 'held'))).toMatchObject({
    blueprint: 'held',
    orphans: [{ id: 'vm-by-hand', resourceId: null, attributes: { ip: '10.0.0.9' } }],
  });

  const limits = await env.cli('blueprint', 'limits', 'held', '--orphans', 'destroy');
  expect(limits.code).toBe(0);
  expect(limits.stdout).toMatch(/orphans\s+destroy: reported, and destroyed/);
  const wrong = await env.cli('blueprint', 'limits', 'held', '--orphans', 'delete');
  expect(wrong.code).toBe(2);
  expect(wrong.stderr).toContain('expected one of: report, destroy');
});
