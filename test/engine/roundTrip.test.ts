import type pg from 'pg';
import { expect, test } from 'vitest';
import { RoundTrip } from '../../src/drain/roundTrip.ts';

const answered = (statements: readonly unknown[]) => statements.map((_, n) => ({ rows: [{ n }] }) as unknown as pg.QueryResult);

test("a round trip's results are read by the names their statements were added under, in the order they were sent", () => {
  const trip = new RoundTrip<'claimed' | 'rows' | 'none'>()
    .add('begin', 'select 1')
    .read('claimed', ['select 2'])
    .read('rows', ['select 3', 'select 4'])
    .add('commit');
  expect(trip.statements).toEqual(['begin', 'select 1', 'select 2', 'select 3', 'select 4', 'commit']);
  const results = trip.results(answered(trip.statements));
  expect(results.one('claimed').rows).toEqual([{ n: 2 }]);
  expect(results.get('rows').map((r) => r.rows)).toEqual([[{ n: 3 }], [{ n: 4 }]]);
  expect(results.get('none')).toEqual([]);
  expect(() => results.one('none')).toThrow(/read nothing as "none"/);
});

test('a name is read once per round trip', () => {
  expect(() => new RoundTrip<'claimed'>().read('claimed', ['select 1']).read('claimed', ['select 2'])).toThrow(/once/);
});
