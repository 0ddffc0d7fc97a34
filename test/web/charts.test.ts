import { expect, test } from 'vitest';
import { lineChart } from '../../src/web/charts.ts';

const from = new Date('2026-01-01T10:00:00Z');
const to = new Date('2026-01-01T11:00:00Z');
const at = (minute: number) => new Date(from.getTime() + minute * 60_000);
const chart = (values: Array<number | null>, name = 'active') =>
  lineChart({
    id: 'leases',
    title: 'Leases',
    format: String,
    from,
    to,
    times: values.map((_, i) => at(i * 10)),
    series: [{ name, tone: 'good', values }],
  }).text;

test('a line breaks where a sample has no value, and a lone value is a dot', () => {
  const svg = chart([1, 2, null, 3, null, 4, 5]);
  expect(svg.match(/<polyline /g)).toHaveLength(2);
  expect(svg.match(/<circle /g)).toHaveLength(1);
  expect(svg).toContain('data-values="1,2,,3,,4,5"');
});

test('the value axis ends at a round number at or above the largest value, and the legend shows the latest value', () => {
  expect(chart([0, 3, 7])).toMatch(/>10<\/text>/);
  expect(chart([120, 180])).toMatch(/>200<\/text>/);
  expect(chart([0.4])).toMatch(/>0\.5<\/text>/);
  expect(chart([0, 0])).toContain('<b>0</b>');
  expect(chart([5, null])).toContain('<b>5</b>');
  expect(chart([null])).toContain('<b>no data</b>');
});

test('time runs along the whole window: a sample at its start is at the left edge, one at its end at the right', () => {
  const svg = lineChart({
    id: 'c',
    title: 'C',
    format: String,
    from,
    to,
    times: [from, to],
    series: [{ name: 's', tone: 'good', values: [1, 1] }],
  }).text;
  const points = /<polyline points="([^"]+)"/
    .exec(svg)![1]!
    .split(' ')
    .map((p) => Number(p.split(',')[0]));
  const axis = /<line class="axis" x1="([\d.]+)"[^>]*x2="([\d.]+)"/.exec(svg)!;
  expect(points).toEqual([Number(axis[1]), Number(axis[2])]);
});

test('names are escaped', () => {
  expect(chart([1], '<script>')).not.toContain('<script>');
});
