import { mkdtemp, readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { ensureFirstAdminToken } from '../../src/api/auth/firstAdminToken.ts';
import { hashSecret } from '../../src/api/auth/tokens.ts';
import { ApiClient } from './support/ApiClient.ts';
import { apiTestEnv } from './support/apiTestEnv.ts';
import { parseJson, runCli } from '../cli/runCli.ts';

/** Tokens from the admin CLI: shown once, stored hashed, listed without secrets, revoked for good. */
const env = apiTestEnv({ worker: false });

test('token create prints the secret once; only its hash is stored; it works until revoked', async () => {
  const created = await runCli(['token', 'create', '--name', 'ci-bot', '--role', 'user'], env.database.url);
  expect(created.code).toBe(0);
  const secret = created.stdout.split('\n')[1]!;
  expect(secret).toMatch(/^slw_[\w-]{43}$/);
  expect(created.stdout).toMatch(/^created token ci-bot \(role user, team default\)\. Its secret, shown only now:\n/);

  const row = await env.database.db.selectFrom('api_tokens').selectAll().where('name', '=', 'ci-bot').executeTakeFirstOrThrow();
  expect(row.secret_sha256).toBe(hashSecret(secret));
  expect(JSON.stringify(row)).not.toContain(secret);

  const client = new ApiClient(env.server.url, secret);
  expect((await client.get('/v1/leases')).status).toBe(200);

  const listed = parseJson(await runCli(['--json', 'token', 'list'], env.database.url));
  expect(listed.find((t: { name: string }) => t.name === 'ci-bot')).toMatchObject({ role: 'user', revokedAt: null });
  expect(JSON.stringify(listed)).not.toMatch(/slw_|secret_sha256/);

  // The server trusts the token it has just seen; the revocation's notice makes it forget it at once.
  expect((await client.get('/v1/leases')).status).toBe(200);
  expect((await runCli(['token', 'revoke', 'ci-bot'], env.database.url)).stdout).toMatch(/^revoked token ci-bot at /);
  const afterRevoke = await client.get('/v1/leases');
  expect(afterRevoke.status).toBe(401);
  expect(afterRevoke.body.message).toBe('the token is unknown or revoked');
  const again = await runCli(['token', 'revoke', 'ci-bot'], env.database.url);
  expect(again.code).toBe(4);
  expect(again.stderr).toMatch(/^error: token ci-bot was already revoked at /);
});

test('token create refuses a bad role, a bad name and a duplicate name, writing nothing', async () => {
  const count = async () => (await env.database.db.selectFrom('api_tokens').select('id').execute()).length;
  const before = await count();
  const badRole = await runCli(['token', 'create', '--name', 'x', '--role', 'root'], env.database.url);
  expect(badRole.code).toBe(2);
  expect(badRole.stderr).toMatch(/--role/);
  expect((await runCli(['token', 'create', '--name', 'Bad Name', '--role', 'user'], env.database.url)).code).toBe(2);
  const duplicate = await runCli(['token', 'create', '--name', 'admin', '--role', 'user'], env.database.url);
  expect(duplicate.code).toBe(4);
  expect(duplicate.stderr).toMatch(/a token named "admin" already exists/);
  expect(await count()).toBe(before);
});

test('the first start makes an admin token and leaves its secret in a file only its owner can read', async () => {
  const home = await mkdtemp(path.join(os.tmpdir(), 'slipway-home-'));
  // This database has tokens already (the test env made one per role): nothing is made.
  expect(await ensureFirstAdminToken(env.database.db, home)).toBeUndefined();
  await env.database.db.deleteFrom('idempotency_keys').execute();
  await env.database.db.deleteFrom('api_tokens').execute();

  const file = await ensureFirstAdminToken(env.database.db, home);
  expect(file).toBe(path.join(home, 'admin-token'));
  expect((await stat(file!)).mode & 0o777).toBe(0o600);
  const secret = (await readFile(file!, 'utf8')).trim();
  const admin = new ApiClient(env.server.url, secret);
  const created = await admin.post('/v1/blueprints', { name: 'first', driver: 'simulated', maxResources: 1 });
  expect(created.status).toBe(201);
  // A second start finds the token and leaves it alone.
  expect(await ensureFirstAdminToken(env.database.db, home)).toBeUndefined();
});
