import { describe, expect, test } from 'vitest';
import { type AutovacuumSettings, maintenanceDue, type TableStatistics, unattendedTables } from '../../src/db/maintenanceDue.ts';

// The decision of which tables need a vacuum or an analyze, over data: the
// server's settings and each table's counts, as the collector reads them.

/** PostgreSQL's defaults, with autovacuum off for the server (as on the stock server here). */
const OFF: AutovacuumSettings = {
  autovacuum: false,
  autovacuum_vacuum_threshold: 50,
  autovacuum_vacuum_scale_factor: 0.2,
  autovacuum_analyze_threshold: 50,
  autovacuum_analyze_scale_factor: 0.1,
  autovacuum_vacuum_insert_threshold: 1000,
  autovacuum_vacuum_insert_scale_factor: 0.2,
};
const ON: AutovacuumSettings = { ...OFF, autovacuum: true };

const table = (counts: Partial<TableStatistics> = {}): TableStatistics => ({
  table: 'commands',
  options: null,
  reltuples: 1000,
  deadRows: 0,
  modifiedSinceAnalyze: 0,
  insertedSinceVacuum: 0,
  ...counts,
});

describe('with autovacuum off for the server', () => {
  test('dead rows past threshold + scale factor × rows ask for a vacuum; at it, nothing', () => {
    // 50 + 0.2 × 1,000 = 250.
    expect(maintenanceDue(OFF, [table({ deadRows: 251, modifiedSinceAnalyze: 251 })])).toEqual([
      { table: 'commands', maintenance: 'vacuum', reason: '251 dead rows, over 250' },
    ]);
    expect(maintenanceDue(OFF, [table({ deadRows: 250 })])).toEqual([]);
  });

  test('inserts since the last vacuum past the insert threshold ask for a vacuum, unless that threshold is -1', () => {
    // 1,000 + 0.2 × 1,000 = 1,200; the analyze threshold (150) is passed as well.
    const inserted = table({ insertedSinceVacuum: 1201, modifiedSinceAnalyze: 1201 });
    expect(maintenanceDue(OFF, [inserted])).toEqual([
      { table: 'commands', maintenance: 'vacuum', reason: '1201 rows inserted since the last vacuum, over 1200' },
    ]);
    expect(maintenanceDue({ ...OFF, autovacuum_vacuum_insert_threshold: -1 }, [inserted])).toEqual([
      { table: 'commands', maintenance: 'analyze', reason: '1201 rows changed since the last analyze, over 150' },
    ]);
  });

  test('changes since the last analyze past its threshold ask for an analyze alone', () => {
    // 50 + 0.1 × 1,000 = 150.
    expect(maintenanceDue(OFF, [table({ modifiedSinceAnalyze: 151, deadRows: 100 })])).toEqual([
      { table: 'commands', maintenance: 'analyze', reason: '151 rows changed since the last analyze, over 150' },
    ]);
    expect(maintenanceDue(OFF, [table({ modifiedSinceAnalyze: 150 })])).toEqual([]);
  });

  test('a table never vacuumed nor analyzed counts as empty', () => {
    expect(maintenanceDue(OFF, [table({ reltuples: -1, modifiedSinceAnalyze: 51 })])).toEqual([
      { table: 'commands', maintenance: 'analyze', reason: '51 rows changed since the last analyze, over 50' },
    ]);
  });

  test("a table's own storage parameters override the server's thresholds", () => {
    const own = table({
      options: ['autovacuum_vacuum_threshold=1000', 'autovacuum_analyze_scale_factor=0'],
      deadRows: 500,
      modifiedSinceAnalyze: 60,
    });
    expect(maintenanceDue(OFF, [own])).toEqual([
      { table: 'commands', maintenance: 'analyze', reason: '60 rows changed since the last analyze, over 50' },
    ]);
  });

  test('every table is decided on by itself, in the order given', () => {
    const tables = [
      table({ table: 'events', deadRows: 300 }),
      table({ table: 'leases' }),
      table({ table: 'graphile_worker._private_jobs', modifiedSinceAnalyze: 200 }),
    ];
    expect(maintenanceDue(OFF, tables).map((due) => [due.table, due.maintenance])).toEqual([
      ['events', 'vacuum'],
      ['graphile_worker._private_jobs', 'analyze'],
    ]);
  });
});

describe('with autovacuum on for the server', () => {
  const busy = { deadRows: 10_000, modifiedSinceAnalyze: 10_000, insertedSinceVacuum: 10_000 };

  test('a table it looks after is left to it, however far past the thresholds', () => {
    expect(maintenanceDue(ON, [table(busy), table({ ...busy, options: ['autovacuum_enabled=true'] })])).toEqual([]);
    expect(unattendedTables(ON, [table(busy)])).toEqual([]);
  });

  test('a table with autovacuum turned off for it is decided on as with the server off', () => {
    const off = table({ ...busy, table: 'leases', options: ['fillfactor=90', 'autovacuum_enabled=false'] });
    expect(unattendedTables(ON, [table(busy), off])).toEqual([off]);
    expect(maintenanceDue(ON, [table(busy), off])).toEqual([{ table: 'leases', maintenance: 'vacuum', reason: '10000 dead rows, over 250' }]);
  });
});
