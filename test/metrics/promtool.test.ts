import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { apiTestEnv } from '../api/support/apiTestEnv.ts';
import { activeLease, simulatedBlueprint } from '../api/support/fixtures.ts';
import { parsePromText, unknownMetrics } from '../helpers/promText.ts';

/**
 * Prometheus's own tools on Slipway's metrics, alert rules and dashboard (a system test: it needs
 * Debian's `prometheus` package for promtool; .ci/run installs it).
 */
const env = apiTestEnv({ worker: true });
const RULES = 'docs/prometheus/slipway-alerts.yml';
const DASHBOARD = 'docs/grafana/slipway-dashboard.json';
const PROM_CLIENT_NAMING = /^slipway_nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/;

function promtool(args: readonly string[], input?: string) {
  const run = spawnSync('promtool', args, { input, encoding: 'utf8' });
  if (run.error) throw new Error(`promtool did not run (Debian package prometheus): ${run.error.message}`);
  return run;
}

async function scrapeAfterWork(): Promise<string> {
  const blueprint = await simulatedBlueprint(env.as.admin, {}, { maxResources: 2, leasesPerResource: 2 });
  const leases = await Promise.all([1, 2, 3].map(() => activeLease(env.as.user, blueprint.name)));
  for (const lease of leases) {
    expect((await env.as.user.post(`/v1/leases/${lease.id}/commands?wait=60`, { kind: 'release' })).status).toBe(200);
  }
  return (await fetch(`${env.server.url}/metrics`)).text();
}

test('promtool check metrics accepts a scrape taken after real work', async () => {
  const scrape = await scrapeAfterWork();
  expect(scrape).toMatch(/^slipway_driver_calls_total\{/m);
  const lint = promtool(['check', 'metrics'], scrape);
  // Three of prom-client's default gauges are named like counters (upstream's choice); nothing else may be reported.
  const problems = (lint.stdout + lint.stderr).split('\n').filter((line) => line !== '');
  expect(problems.filter((line) => !PROM_CLIENT_NAMING.test(line))).toEqual([]);
  expect(problems.length).toBeLessThanOrEqual(3);
});

test('the shipped alert rules pass promtool check rules and use only metrics a scrape has', async () => {
  const check = promtool(['check', 'rules', RULES]);
  expect(check.stdout + check.stderr).toMatch(/SUCCESS: \d+ rules found/);
  expect(check.status).toBe(0);

  const rules = readFileSync(RULES, 'utf8');
  expect(new Set(rules.match(/\bslipway_\w+/g)).size).toBeGreaterThan(3);
  expect(unknownMetrics(parsePromText(await (await fetch(`${env.server.url}/metrics`)).text()), rules)).toEqual([]);
});

test("the Grafana dashboard's expressions are PromQL that promtool parses", () => {
  const { panels } = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: Array<{ id: number; targets: Array<{ refId: string; expr: string }> }>;
  };
  // Each expression as a recording rule (a JSON file is YAML), Grafana's own
  // interval variable replaced by what it stands for.
  const rules = panels.flatMap((panel) =>
    panel.targets.map((target) => ({
      record: `slipway:dashboard:panel${panel.id}_${target.refId}`,
      expr: target.expr.replaceAll('$__rate_interval', '5m'),
    })),
  );
  expect(rules.length).toBeGreaterThan(10);
  const file = join(mkdtempSync(join(tmpdir(), 'slipway-dashboard-')), 'rules.yml');
  writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
  const check = promtool(['check', 'rules', file]);
  expect(check.stdout + check.stderr).toContain(`SUCCESS: ${rules.length} rules found`);
  expect(check.status).toBe(0);
});
