import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { parsePromText, unknownMetrics } from '../helpers/promText.ts';

/**
 * The shipped Grafana dashboard (docs/grafana/slipway-dashboard.json) asks
 * only for metrics a real Slipway serves: a renamed or removed family fails
 * here rather than as an empty panel.
 */
const env = apiTestEnv({ worker: false });
const DASHBOARD = 'docs/grafana/slipway-dashboard.json';

interface Panel {
  readonly title: string;
  readonly targets: ReadonlyArray<{ readonly expr: string }>;
}

test('every metric the dashboard queries is in a scrape of a running Slipway', async () => {
  const { panels } = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
  const answer = await fetch(`${env.server.url}/metrics`);
  expect(answer.status).toBe(200);
  const scraped = parsePromText(await answer.text());
  for (const panel of panels) {
    expect(panel.targets.length, panel.title).toBeGreaterThan(0);
    for (const { expr } of panel.targets) {
      expect(expr, panel.title).toMatch(/\bslipway_[a-z0-9_]+/);
      expect(unknownMetrics(scraped, expr), `${panel.title}: ${expr}`).toEqual([]);
    }
  }
  // The panels the dashboard promises (docs/metrics.md), each by the family it shows.
  const queried = panels.flatMap((p) => p.targets.map((t) => t.expr)).join('\n');
  for (const family of [
    'slipway_commands_appended_total',
    'slipway_commands_settled_total',
    'slipway_commands_backlog',
    'slipway_commands_overdue',
    'slipway_command_settle_seconds_bucket',
    'slipway_lease_wait_seconds_bucket',
    'slipway_driver_calls_total',
    'slipway_http_requests_total',
    'slipway_http_request_seconds_bucket',
    'slipway_live_workers',
    'slipway_waiting_leases',
    'slipway_preemptions_total',
    'slipway_lease_endings_total',
  ]) {
    expect(queried).toContain(family);
  }
});

test('a name the scrape lacks, or a histogram suffix on a counter, is reported', async () => {
  const scraped = parsePromText(await (await fetch(`${env.server.url}/metrics`)).text());
  expect(unknownMetrics(scraped, 'rate(slipway_no_such_total[5m]) + rate(slipway_commands_settled_total_bucket[5m])')).toEqual([
    'slipway_no_such_total',
    'slipway_commands_settled_total_bucket',
  ]);
  expect(unknownMetrics(scraped, 'rate(slipway_lease_wait_seconds_count[5m])')).toEqual([]);
});
