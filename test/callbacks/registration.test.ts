import { sql } from 'kysely';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { attachCallback } from '../../src/callbacks/attachCallback.ts';
import { parseAllowedHosts } from '../../src/domain/allowedHosts.ts';
import { checkCallbackUrl } from '../../src/callbacks/CallbackRequest.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { InvalidInputError, NotFoundError } from '../../src/domain/errors.ts';
import { createLeases, releaseLease, simulatedBlueprint } from '../concurrency/support/fixtures.ts';
import { createTestDatabase } from '../helpers/testDatabase.ts';
import { attachLater, LOOPBACK, releaseWithCallback } from './support/callbackFixtures.ts';

/** No worker here: registration is checked before anything runs. */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let leaseId: number;
beforeAll(async () => {
  database = await createTestDatabase();
  const blueprint = await simulatedBlueprint(database.db, 'registration', { maxResources: 1, leasesPerResource: 1 });
  leaseId = (await createLeases(database.db, blueprint, 1))[0]!.id;
});
afterAll(async () => database?.drop());

async function rowCounts() {
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from commands)::int as commands,
           (select count(*) from command_callbacks)::int as callbacks,
           (select count(*) from graphile_worker.jobs)::int as jobs
  `.execute(database.db);
  return rows[0]!;
}

test.each([
  ['a host not on the list', 'http://example.com/hook', /host "example.com" is not allowed/],
  ['a cloud metadata address', 'http://169.254.169.254/latest/meta-data', /host "169.254.169.254" is not allowed/],
  ['a name that only starts like an allowed one', 'http://localhost.evil.example/hook', /host "localhost.evil.example" is not allowed/],
  ['another scheme', 'ftp://localhost/hook', /scheme "ftp" is not allowed/],
  ['a file URL', 'file:///etc/passwd', /scheme "file" is not allowed/],
  ['credentials in the URL', 'http://user:secret@localhost/hook', /a user name or password in the URL is not allowed/],
  ['no URL at all', 'hook', /"hook" is not an absolute URL/],
  ['an over-long URL', `http://localhost/${'a'.repeat(2100)}`, /longer than 2048 characters/],
])('refused at registration: %s, with what would be allowed, and nothing written', async (_what, url, problem) => {
  const before = await rowCounts();
  const attempt = releaseWithCallback(database.db, leaseId, url);
  await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
  await expect(attempt).rejects.toThrow(problem);
  await expect(attempt).rejects.toThrow(
    /^callback\.url: .*; expected http\(s\):\/\/<host>\[:port\]\/<path> with a host allowed by SLIPWAY_CALLBACK_ALLOWED_HOSTS \(localhost, 127\.0\.0\.1, ::1\)$/,
  );
  // The release appended in the same transaction went with it.
  expect(await rowCounts()).toEqual(before);
});

test('the loopback default accepts localhost, 127.0.0.1 and ::1 in any spelling, and keeps the URL canonical', () => {
  expect(checkCallbackUrl('http://LOCALHOST:8080/hook#frag', LOOPBACK)).toBe('http://localhost:8080/hook');
  expect(checkCallbackUrl('https://127.1/hook', LOOPBACK)).toBe('https://127.0.0.1/hook');
  expect(checkCallbackUrl('http://[0:0:0:0:0:0:0:1]:9/x?y=1', LOOPBACK)).toBe('http://[::1]:9/x?y=1');
});

test('an allow-list names hosts exactly, or every name under a domain with *.', () => {
  const allowed = parseAllowedHosts('hooks.example.com, *.internal.example');
  expect(checkCallbackUrl('https://hooks.example.com/a', allowed)).toBe('https://hooks.example.com/a');
  expect(checkCallbackUrl('https://ci.internal.example/a', allowed)).toBe('https://ci.internal.example/a');
  expect(() => checkCallbackUrl('https://internal.example/a', allowed)).toThrow(/host "internal.example" is not allowed/);
  expect(() => checkCallbackUrl('http://localhost/a', allowed)).toThrow(/\(hooks.example.com, \*.internal.example\)/);
});

test('an empty allow-list disables callbacks, and says so', () => {
  const none = loadConfig({ SLIPWAY_CALLBACK_ALLOWED_HOSTS: '' }).SLIPWAY_CALLBACK_ALLOWED_HOSTS;
  expect(() => checkCallbackUrl('http://localhost/a', none)).toThrow(/\(none: callbacks are disabled\)/);
});

test.each([
  ['SLIPWAY_CALLBACK_ALLOWED_HOSTS', 'localhost, http://example.com', /SLIPWAY_CALLBACK_ALLOWED_HOSTS: "http:\/\/example.com" is not a host name/],
  ['SLIPWAY_CALLBACK_ALLOWED_HOSTS', 'example.com:443', /SLIPWAY_CALLBACK_ALLOWED_HOSTS: "example.com:443" is not a host name/],
  ['SLIPWAY_CALLBACK_SECRET', 'short', /SLIPWAY_CALLBACK_SECRET: must be at least 32 characters/],
  ['SLIPWAY_CALLBACK_MAX_ATTEMPTS', '0', /SLIPWAY_CALLBACK_MAX_ATTEMPTS/],
])('a bad %s stops the configuration with a message naming it', (name, value, message) => {
  expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
  expect(() => loadConfig({ [name]: value })).toThrow(message);
});

test('a callback on a command that does not exist is refused, writing nothing', async () => {
  const before = await rowCounts();
  const attempt = database.db.transaction().execute((trx) => attachCallback(trx, 987654, 'http://localhost/x', LOOPBACK));
  await expect(attempt).rejects.toBeInstanceOf(NotFoundError);
  expect(await rowCounts()).toEqual(before);
});

test('the same URL on the same command twice is one callback', async () => {
  const first = await releaseWithCallback(database.db, leaseId, 'http://localhost:1/twice');
  const again = await database.db.transaction().execute((trx) => attachCallback(trx, first.command.id, 'http://localhost:1/twice', LOOPBACK));
  expect(again.id).toBe(first.callback.id);
  const rows = await database.db.selectFrom('command_callbacks').select('id').where('command_id', '=', first.command.id).execute();
  expect(rows).toHaveLength(1);
  // Nothing has run (no worker): the tree is unsettled, so no delivery is queued yet.
  expect(first.callback.status).toBe('waiting');
});

test('a callback on a request that coalesced into a queued command follows that command', async () => {
  const [lease] = await createLeases(database.db, await simulatedBlueprint(database.db, 'coalescing', { maxResources: 1, leasesPerResource: 1 }), 1);
  const first = await releaseLease(database.db, lease!.id);
  const duplicate = await releaseLease(database.db, lease!.id);
  expect(duplicate.coalesced).toBe(true);
  const callback = await attachLater(database.db, duplicate.record.id, 'http://localhost:1/joined');
  expect(callback).toMatchObject({ command_id: first.command.id, status: 'waiting' });
});
