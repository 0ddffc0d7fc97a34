import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, test } from 'vitest';
import { apiTestEnv } from './support/apiTestEnv.ts';

/**
 * The OpenAPI document the server generates from its routes' schemas,
 * linted by Redocly's CLI (a devDependency, run from node_modules: no
 * network) with the rules in redocly.yaml. A finding fails the test and is
 * printed as the linter wrote it.
 */
const env = apiTestEnv({ worker: false });
const REDOCLY = join(import.meta.dirname, '../../node_modules/.bin/redocly');
const CONFIG = join(import.meta.dirname, 'redocly.yaml');
const dir = await mkdtemp(join(tmpdir(), 'slipway-openapi-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

interface Problem {
  readonly ruleId: string;
  readonly message: string;
  readonly location: ReadonlyArray<{ pointer: string }>;
}

/** Redocly's findings on `document`: an empty list when it is clean. */
async function lint(name: string, document: unknown): Promise<Problem[]> {
  const file = join(dir, name);
  await writeFile(file, JSON.stringify(document, null, 2));
  // Telemetry and the update check off: the linter works offline.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  const run = await promisify(execFile)(REDOCLY, ['lint', file, '--config', CONFIG, '--format=json'], { env }).catch(
    // It exits 1 when it finds errors; its report is on stdout either way.
    (failed: { stdout?: string; stderr?: string }) => failed,
  );
  const report = JSON.parse(run.stdout ?? '') as { problems?: Problem[] };
  if (!report.problems) throw new Error(`redocly gave no report: ${run.stderr}`);
  return report.problems;
}

const findings = (problems: readonly Problem[]) => problems.map((p) => `${p.ruleId}: ${p.message} (at ${p.location[0]?.pointer})`);

test('the OpenAPI document passes the lint', async () => {
  const { status, body } = await env.anonymous.get('/v1/openapi.json');
  expect(status).toBe(200);
  expect(findings(await lint('openapi.json', body))).toEqual([]);
});

test('the lint finds what is wrong: an operation without its operationId', async () => {
  const { body } = await env.anonymous.get('/v1/openapi.json');
  delete body.paths['/v1/leases'].post.operationId;
  const problems = await lint('broken.json', body);
  expect(problems.map((p) => p.ruleId)).toContain('operation-operationId');
});
