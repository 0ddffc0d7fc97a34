import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createToken } from '../../src/api/auth/tokens.ts';
import { ApiServer } from '../../src/server/ApiServer.ts';
import { loadConfig } from '../../src/config.ts';
import { EmbeddedDatabase, type ServerBinaries } from '../../src/db/EmbeddedDatabase.ts';
import { createFreshDatabase, type FreshDatabase } from '../../src/db/freshDatabase.ts';
import { runCollectorPass } from '../../src/gc/runCollector.ts';
import { SlipwayWorker } from '../../src/worker/SlipwayWorker.ts';
import { ApiClient } from '../api/support/ApiClient.ts';
import { TEST_GC } from '../gc/support/handDrain.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { waitFor } from '../helpers/waitFor.ts';

/**
 * A stock PostgreSQL built with LLVM compiles any statement whose estimated
 * cost passes `jit_above_cost`, and `jit = on` is its default; the embedded
 * binaries have no LLVM, so the rest of the suite cannot see it. This file
 * runs the service's lifecycles on such a server, this machine's own build
 * (its `pg_config`), in a cluster of its own with pg_stat_statements loaded
 * to count JIT-compiled functions per statement, nested plpgsql statements
 * included, and asserts that none of Slipway's statements was compiled
 * (src/db/sessionSettings.ts). Nothing is timed.
 */
const binaries = systemBinaries();
const HOME = path.resolve('.slipway', 'test-jit');

const state = {} as { server: EmbeddedDatabase; admin: pg.Client; database: FreshDatabase; api: ApiServer; worker: SlipwayWorker };

beforeAll(async () => {
  if (!binaries) return;
  state.server = await EmbeddedDatabase.open(HOME, testLog, 'postgres', {
    binaries,
    settings: ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all', 'jit=on'],
  });
  state.admin = new pg.Client({ connectionString: state.server.url });
  await state.admin.connect();
  await state.admin.query('create extension if not exists pg_stat_statements');
  state.database = await createFreshDatabase(state.server.url, testLog, { prefix: 'slipway_jit', poolSize: 20 });
  const config = loadConfig({ DATABASE_URL: state.database.url, LOG_LEVEL: 'warn', SLIPWAY_API_PORT: '0' });
  state.worker = await SlipwayWorker.start(state.database, config, testLog);
  state.api = await ApiServer.start(state.database, config, testLog);
});

afterAll(async () => {
  await state.api?.stop();
  await state.worker?.stop();
  await state.database?.drop();
  await state.admin?.end();
  await state.server?.stop();
});

test.skipIf(!binaries)('no statement of the drain, the API or the collector is JIT-compiled on a server with JIT on', async () => {
  const { secret } = await createToken(state.database.db, { name: 'admin', role: 'admin' }, 'test');
  const admin = new ApiClient(state.api.url, secret);
  const created = await admin.post('/v1/blueprints', {
    name: 'jit',
    driver: 'simulated',
    settings: {},
    maxResources: 2,
    leasesPerResource: 2,
    minResources: 1,
    checkIntervalMs: 1000,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);

  // More leases than slots: the last two wait in line and are granted as the first go.
  const first = await Promise.all(Array.from({ length: 4 }, () => admin.post('/v1/leases?wait=60', { blueprint: 'jit', heartbeatMs: 60_000 })));
  const waiting = await Promise.all(Array.from({ length: 2 }, () => admin.post('/v1/leases', { blueprint: 'jit' })));
  for (const answer of [...first, ...waiting]) expect(answer.status, JSON.stringify(answer.body)).toBeLessThan(300);
  for (const answer of [...first, ...waiting]) {
    const id = answer.body.lease.id as number;
    expect((await admin.get(`/v1/leases/${id}`)).status).toBe(200);
    await waitFor(`lease ${id} active`, async () => (await admin.get(`/v1/leases/${id}`)).body.lease.state === 'active');
    await admin.post(`/v1/leases/${id}/commands?wait=60`, { kind: 'renew' });
    const release = await admin.post(`/v1/leases/${id}/commands?wait=60`, { kind: 'release', reason: 'done' });
    expect(release.status, JSON.stringify(release.body)).toBeLessThan(300);
  }
  await runCollectorPass(state.database, TEST_GC, 'cli', testLog);
  for (const list of ['/v1/leases', '/v1/resources', '/v1/blueprints', '/v1/commands']) expect((await admin.get(list)).status).toBe(200);

  // The counter can count: the same server compiles a statement forced past
  // the threshold on a session without Slipway's settings.
  await state.admin.query('set jit_above_cost = 0');
  await state.admin.query('select count(*) from pg_class');
  const forced = await state.admin.query<{ compiled: string }>(
    `select coalesce(sum(jit_functions), 0) as compiled from pg_stat_statements
      where dbid = (select oid from pg_database where datname = 'postgres') and query like 'select count(*) from pg_class%'`,
  );
  expect(Number(forced.rows[0]!.compiled)).toBeGreaterThan(0);

  const ours = await state.admin.query<{ query: string; calls: string }>(
    'select s.query, s.calls from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = $1',
    [new URL(state.database.url).pathname.slice(1)],
  );
  expect(ours.rows.length).toBeGreaterThan(50);
  const compiled = await state.admin.query<{ query: string; jit_functions: string }>(
    `select s.query, s.jit_functions from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = $1 and s.jit_functions > 0`,
    [new URL(state.database.url).pathname.slice(1)],
  );
  expect(compiled.rows).toEqual([]);
});

/** This machine's PostgreSQL build, if `pg_config` names one with the JIT provider and pg_stat_statements. */
function systemBinaries(): ServerBinaries | undefined {
  let bindir: string;
  let libdir: string;
  try {
    bindir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    libdir = execFileSync('pg_config', ['--pkglibdir'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
  const found = { initdb: path.join(bindir, 'initdb'), postgres: path.join(bindir, 'postgres') };
  const needed = [found.initdb, found.postgres, path.join(libdir, 'llvmjit.so'), path.join(libdir, 'pg_stat_statements.so')];
  return needed.every((file) => existsSync(file)) ? found : undefined;
}
