import { sql } from 'kysely';
import { beforeAll, describe, expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { runCli } from '../cli/runCli.ts';
import { WebClient } from './support/WebClient.ts';

const env = apiTestEnv();
let client: WebClient;
let blueprint: { id: number; name: string };
let other: { id: number; name: string };
const leases: number[] = [];

/** The ids a list page links to, in the order shown. */
function idsOn(page: string, kind: 'leases' | 'resources' | 'commands'): number[] {
  const body = page.slice(page.indexOf('<tbody>'), page.indexOf('</tbody>'));
  return [...body.matchAll(new RegExp(`<tr><td[^>]*><a href="/${kind}/(\\d+)"`, 'g'))].map((m) => Number(m[1]));
}

beforeAll(async () => {
  blueprint = await simulatedBlueprint(env.as.admin);
  other = await simulatedBlueprint(env.as.admin);
  for (let i = 0; i < 5; i++) leases.push((await activeLease(env.as.operator, blueprint.name)).id);
  leases.push((await activeLease(env.as.user, other.name)).id);
  await env.as.operator.post(`/v1/leases/${leases[0]}/commands?wait=30`, { kind: 'release', reason: 'filter me' });
  client = new WebClient(env.server.url);
  await client.signIn(env.as.viewer.token!);
});

describe('filters', () => {
  test('leases by state, blueprint (name or id) and holder, newest first', async () => {
    expect(idsOn((await client.get('/leases')).text, 'leases')).toEqual([...leases].reverse());
    expect(idsOn((await client.get('/leases?state=destroyed')).text, 'leases')).toEqual([leases[0]]);
    expect(idsOn((await client.get(`/leases?blueprint=${other.name}`)).text, 'leases')).toEqual([leases[5]]);
    expect(idsOn((await client.get(`/leases?blueprint=${blueprint.id}&state=active`)).text, 'leases')).toEqual(leases.slice(1, 5).reverse());
    expect(idsOn((await client.get('/leases?holder=token%3Auser')).text, 'leases')).toEqual([leases[5]]);
  });

  test('empty fields of the filter form are no filter, and the form shows what was asked', async () => {
    const page = await client.get('/leases?state=&blueprint=&holder=token%3Auser');
    expect(idsOn(page.text, 'leases')).toEqual([leases[5]]);
    expect(page.text).toContain('name="holder" value="token:user"');
  });

  test('commands by source, issuer, status and target', async () => {
    const release = await env.database.db.selectFrom('commands').select('id').where('reason', '=', 'filter me').executeTakeFirstOrThrow();
    expect(idsOn((await client.get('/commands?issuer=token%3Aoperator&status=done&source=api')).text, 'commands')).toContain(release.id);
    expect(idsOn((await client.get('/commands?source=web')).text, 'commands')).toEqual([]);
    const onLease = idsOn((await client.get(`/commands?target=lease:${leases[0]}`)).text, 'commands');
    expect(onLease).toContain(release.id);
    expect(idsOn((await client.get('/commands?source=gc')).text, 'commands')).toEqual([]);
  });

  test('resources by state and blueprint', async () => {
    const page = await client.get(`/resources?blueprint=${other.name}&state=active`);
    expect(idsOn(page.text, 'resources')).toHaveLength(1);
  });
});

test('a lease that can no longer be renewed shows no expiry in the list, as on its page', async () => {
  // Both leases expire in an hour; one is released (and so destroyed).
  const [ended, live] = [leases[1]!, leases[2]!];
  for (const id of [ended, live])
    await env.as.operator.post(`/v1/leases/${id}/commands?wait=30`, { kind: 'renew', payload: { expiresInMs: 3_600_000 } });
  await env.as.operator.post(`/v1/leases/${ended}/commands?wait=30`, { kind: 'release' });
  const page = (await client.get(`/leases?blueprint=${blueprint.name}`)).text;
  const row = (id: number) => {
    const start = page.search(new RegExp(`<tr><td[^>]*><a href="/leases/${id}"`));
    return page.slice(start, page.indexOf('</tr>', start));
  };
  expect(row(live)).toMatch(/<time datetime="[^"]+"[^>]*>.*<\/time>.*<time/s);
  expect(row(ended)).not.toMatch(/<time datetime="[^"]+"[^>]*>.*<\/time>.*<time/s);
});

describe('pagination', () => {
  test('pages follow each other by id, without gaps or repeats, keeping the filters', async () => {
    const seen: number[] = [];
    let path: string | undefined = `/leases?blueprint=${blueprint.id}&limit=2`;
    while (path) {
      const page = await client.get(path);
      seen.push(...idsOn(page.text, 'leases'));
      const next = /<a href="([^"]+)" rel="next">/.exec(page.text)?.[1]?.replaceAll('&amp;', '&');
      if (next) expect(next).toContain(`blueprint=${blueprint.id}`);
      path = next;
    }
    expect(seen).toEqual(leases.slice(0, 5).reverse());
  });
});

describe('bad input', () => {
  test.each([
    ['/leases?state=flying', 400, 'query.state'],
    ['/leases?limit=0', 400, 'query.limit'],
    ['/leases?limit=5000', 400, 'query.limit'],
    ['/leases?after=abc', 400, 'query.after'],
    ['/leases?colour=red', 400, 'colour'],
    ['/commands?target=lease', 400, 'expected &lt;kind&gt;:&lt;id&gt;'],
    ['/commands?source=email', 400, 'query.source'],
    ['/leases?blueprint=no-such-blueprint', 404, 'no-such-blueprint'],
    ['/leases/abc', 400, 'params.id'],
    ['/leases/0', 400, 'params.id'],
    ['/leases/999999', 404, 'lease 999999'],
    ['/resources/999999', 404, 'resource 999999'],
    ['/commands/999999', 404, 'command 999999'],
    ['/leases/1?outcome=hacked', 400, 'query.outcome'],
    ['/no/such/page', 404, 'page /no/such/page does not exist'],
  ])('%s is a %i page that says what is wrong', async (path, status, says) => {
    const page = await client.get(path);
    expect(page.status).toBe(status);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.text).toContain(says);
    expect(page.text).not.toMatch(/at \w+ \(/); // no stack
  });

  test('a button form with a kind no button posts is refused, naming the field, and writes nothing', async () => {
    const operator = new WebClient(env.server.url);
    await operator.signIn(env.as.operator.token!);
    await operator.get(`/leases/${leases[1]}`);
    const count = async () => (await env.database.db.selectFrom('commands').select('id').execute()).length;
    const before = await count();
    const forms: Record<string, string>[] = [{ kind: 'destroy' }, { kind: 'release', reason: 'x'.repeat(1001) }, { kind: 'release', extra: '1' }];
    for (const fields of forms) {
      const answer = await operator.post(`/leases/${leases[1]}/commands`, fields);
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/body[.:]/);
    }
    expect(await count()).toBe(before);
  });
});

describe('at scale', () => {
  test('with 150,000 leases, filtered pages deep in the list are answered from indexes, quickly', async () => {
    // Mostly destroyed history; one lease in 1,000 broken; 150 leases per bulk holder.
    await sql`
      insert into leases (blueprint_id, holder, state, created_at, updated_at)
      select ${other.id}, 'bulk-' || (g % 1000), case when g % 1000 = 0 then 'broken' else 'destroyed' end, now(), now()
      from generate_series(1, 150000) g
    `.execute(env.database.db);
    await sql`analyze leases`.execute(env.database.db);
    // A selective filter's page is read through that filter's (column, id)
    // index, from `after` on, never by a scan. A filter most rows match (the
    // bulk blueprint) may be read backwards through that index or the
    // primary key, whichever the planner prefers: both stop after a page.
    const filters = [
      ['state', 'broken', 'leases_by_state_id'],
      ['holder', 'bulk-7', 'leases_by_holder_id'],
      ['blueprint_id', other.id, '(leases_by_blueprint_id|leases_pkey)'],
    ] as const;
    for (const [column, value, index] of filters) {
      const { rows } = await sql<{ 'QUERY PLAN': string }>`
        explain select * from leases where ${sql.ref(column)} = ${value} and id < 100000 order by id desc limit 101
      `.execute(env.database.db);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan, plan).toMatch(new RegExp(`(Index Scan Backward using|Bitmap Index Scan on) ${index}\\b`));
      expect(plan).not.toContain('Seq Scan');
    }
    // The pages those plans serve.
    const first = await client.get('/leases?state=broken&limit=100');
    expect(idsOn(first.text, 'leases')).toHaveLength(100);
    const deep = await client.get('/leases?holder=bulk-7&after=20000&limit=100');
    expect(idsOn(deep.text, 'leases').every((id) => id < 20000)).toBe(true);
    const overview = await client.get('/');
    expect(overview.status).toBe(200);
  });
});

test("a static pool's list rows (web, API, CLI) and page give its resources' own slots, not the blueprint's default", async () => {
  const entries = [
    { name: 'big', slots: 4 },
    { name: 'small', slots: 2 },
  ];
  const made = await env.as.admin.post('/v1/blueprints', { name: 'mixed-slots', driver: 'static-pool', settings: { entries }, maxResources: 2 });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  // Five leases: the first entry's four slots, then the second entry.
  for (let i = 0; i < 5; i++) await activeLease(env.as.operator, 'mixed-slots');
  const list = (await client.get('/blueprints')).text;
  const row = list.slice(list.indexOf(`id="blueprint-${made.body.id}"`), list.indexOf('</tr>', list.indexOf(`id="blueprint-${made.body.id}"`)));
  expect(row).toContain('(2–4 per resource)');
  const listed = await env.as.viewer.get('/v1/blueprints?limit=100');
  expect(listed.body.items.find((b: { id: number }) => b.id === made.body.id)).toMatchObject({
    leasesPerResource: 1,
    slotsPerResource: { min: 2, max: 4 },
  });
  const cli = await runCli(['blueprint', 'list', '--limit', '100'], env.database.url);
  expect(cli.stdout).toMatch(/\n\d+ +mixed-slots +static-pool +enabled +2\/2 +2–4 /);
  const page = (await client.get(`/blueprints/${made.body.id}`)).text;
  expect(page).toMatch(
    /<dt>Limits<\/dt><dd>0–2 resources, 2–4 \(as its driver made each live resource; 1 where the driver does not say\) lease\(s\) each/,
  );
});
