import { sql } from 'kysely';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { analyzeUnattendedTables } from '../../src/db/maintainTable.ts';
import { warnAboutServerSettings } from '../../src/db/serverChecks.ts';
import { readAutovacuumSettings } from '../../src/db/tableStatistics.ts';
import { testLog } from '../helpers/testDatabase.ts';
import { handDrainSuite } from './support/handDrain.ts';

// The collector's table maintenance on a real server: one table of
// Slipway's has autovacuum turned off for it, is churned past autovacuum's
// thresholds, and a pass vacuums it, then analyzes it; a table autovacuum
// looks after is left alone. On a server with autovacuum off altogether
// (the stock server of `npm run test:server`) no table is looked after, so
// the pass maintains that one too.
const { db, hand } = handDrainSuite();
/** Autovacuum is turned off for this one. */
const SUBJECT = 'simulated_effects';
/** Autovacuum keeps looking after this one, where the server runs it. */
const CONTROL = 'drain_wakeups';
let serverAutovacuum: boolean;

beforeAll(async () => {
  serverAutovacuum = (await readAutovacuumSettings(db())).autovacuum;
  await sql`alter table ${sql.table(SUBJECT)} set (autovacuum_enabled = false)`.execute(db());
});
afterAll(async () => {
  await sql`alter table ${sql.table(SUBJECT)} reset (autovacuum_enabled)`.execute(db());
});

/** The manual vacuums and analyzes of a table so far (autovacuum's own runs are counted apart). */
async function runs(table: string): Promise<{ vacuums: number; analyzes: number }> {
  const { rows } = await sql<{ vacuums: number; analyzes: number }>`
    select vacuum_count as vacuums, analyze_count as analyzes from pg_stat_user_tables where relname = ${table}`.execute(db());
  return rows[0]!;
}

/** Rows churn has made so far: each call's are new ones. */
let made = 0;

/**
 * `inserted` new rows into a table, and then `deleted` of them deleted,
 * each in a transaction of its own, on one connection whose counts are
 * flushed to the statistics before the answer (a backend otherwise
 * reports them at most once a second).
 */
async function churn(table: typeof SUBJECT | typeof CONTROL, inserted: number, deleted: number): Promise<void> {
  const [from, to] = [made + 1, made + inserted];
  made = to;
  await db()
    .connection()
    .execute(async (connection) => {
      const rows =
        table === SUBJECT
          ? sql`insert into simulated_effects (operation, object_id, idempotency_key)
                select 'churn', n, 'key' from generate_series(${from}::int, ${to}::int) n`
          : sql`insert into drain_wakeups (target_kind, target_id) select 'lease', -n from generate_series(${from}::int, ${to}::int) n`;
      await rows.execute(connection);
      const gone =
        table === SUBJECT
          ? sql`delete from simulated_effects where operation = 'churn' and object_id between ${from} and ${from + deleted - 1}`
          : sql`delete from drain_wakeups where -target_id between ${from} and ${from + deleted - 1}`;
      await gone.execute(connection);
      await sql`select pg_stat_force_next_flush()`.execute(connection);
    });
}

test('a pass vacuums a table autovacuum does not look after once its dead rows pass the threshold, then analyzes it once its changes do', async () => {
  const subject = await runs(SUBJECT);
  const control = await runs(CONTROL);
  // 200 dead rows in a table that was never vacuumed (counted as empty): past 50 + 0.2 × 0.
  await churn(SUBJECT, 200, 200);
  await churn(CONTROL, 200, 200);
  const pass = await hand.pass();
  expect(pass.status).toBe('done');
  expect(pass.steps.maintainTables?.maintained).toContainEqual({ table: SUBJECT, maintenance: 'vacuum', reason: '200 dead rows, over 50' });
  // VACUUM (ANALYZE): one run of each.
  expect(await runs(SUBJECT)).toEqual({ vacuums: subject.vacuums + 1, analyzes: subject.analyzes + 1 });
  const controlMaintained = pass.steps.maintainTables?.maintained?.some((m) => m.table === CONTROL);
  if (serverAutovacuum) {
    expect(controlMaintained).toBe(false);
    expect(await runs(CONTROL)).toEqual(control);
  } else {
    expect(controlMaintained).toBe(true);
    expect((await runs(CONTROL)).vacuums).toBe(control.vacuums + 1);
  }

  // 100 rows more: past the analyze threshold (50 + 0.1 × 0 rows), short of a vacuum's.
  await churn(SUBJECT, 100, 0);
  const next = await hand.pass();
  expect(next.steps.maintainTables?.maintained).toContainEqual({
    table: SUBJECT,
    maintenance: 'analyze',
    reason: '100 rows changed since the last analyze, over 50',
  });
  expect(await runs(SUBJECT)).toEqual({ vacuums: subject.vacuums + 1, analyzes: subject.analyzes + 2 });

  // Below every threshold: nothing to do.
  const quiet = await hand.pass();
  expect(quiet.steps.maintainTables?.maintained?.some((m) => m.table === SUBJECT)).toBe(false);
  expect(await runs(SUBJECT)).toEqual({ vacuums: subject.vacuums + 1, analyzes: subject.analyzes + 2 });
});

test('with maintenance turned off, a pass leaves every table alone', async () => {
  await churn(SUBJECT, 300, 300);
  const before = await runs(SUBJECT);
  const pass = await hand.pass({ maintainTables: false });
  expect(pass.steps.maintainTables).toEqual({ found: 0, actions: [], truncated: false });
  expect(await runs(SUBJECT)).toEqual(before);
  // The same pass with it on does what was due.
  expect((await hand.pass()).steps.maintainTables?.maintained).toContainEqual(expect.objectContaining({ table: SUBJECT, maintenance: 'vacuum' }));
});

test('after migrating, the tables autovacuum does not look after are analyzed, and only those', async () => {
  const subject = await runs(SUBJECT);
  const control = await runs(CONTROL);
  await analyzeUnattendedTables(db(), testLog);
  expect((await runs(SUBJECT)).analyzes).toBe(subject.analyzes + 1);
  expect((await runs(CONTROL)).analyzes).toBe(control.analyzes + (serverAutovacuum ? 0 : 1));
});

test('at start, a process warns once that autovacuum is off, and where, and whether Slipway maintains those tables', async () => {
  const warnings = async (maintainTables: boolean) => {
    const lines: string[] = [];
    await warnAboutServerSettings(db(), pino({ level: 'warn' }, { write: (line: string) => lines.push(line) }), maintainTables);
    return lines.map((line) => JSON.parse(line) as { msg: string; tables: string[] });
  };
  const [on] = await warnings(true);
  expect(on?.tables).toContain(SUBJECT);
  expect(on?.msg).toMatch(serverAutovacuum ? /^autovacuum is off for .*simulated_effects/ : /^autovacuum is off on this PostgreSQL server/);
  expect(on?.msg).toMatch(/Slipway's collector vacuums and analyzes its tables there itself/);
  expect((await warnings(false))[0]?.msg).toMatch(/SLIPWAY_GC_MAINTAIN_TABLES is false: Slipway's queue tables will grow and slow down/);
  if (serverAutovacuum) {
    await sql`alter table ${sql.table(SUBJECT)} reset (autovacuum_enabled)`.execute(db());
    try {
      expect(await warnings(true)).toEqual([]);
    } finally {
      await sql`alter table ${sql.table(SUBJECT)} set (autovacuum_enabled = false)`.execute(db());
    }
  }
});
