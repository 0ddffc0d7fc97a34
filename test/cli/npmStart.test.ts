import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';
import { waitFor } from '../helpers/waitFor.ts';
import { cliEnv, finished, runCli, type CliRun } from './runCli.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// An embedded database of this file's own, under .slipway/ as the tests' server is (run as root,
// PostgreSQL runs as the postgres user, which must be able to reach it).
const HOME = path.join(ROOT, '.slipway', `npm-start-${randomBytes(4).toString('hex')}`);
const POSTMASTER_PID = path.join(HOME, 'pg', 'postmaster.pid');

/** `npm start` as an operator runs it, up and ready, with the processes it is made of. */
interface Started {
  readonly npm: ChildProcess;
  /** Resolves once npm and the node process that shares its stdout have both exited. */
  readonly output: Promise<CliRun>;
  readonly port: number;
  readonly nodePid: number;
  readonly postgresPid: number;
}

const started: Started[] = [];

afterAll(async () => {
  // A failed test must not leave a service or its server behind.
  for (const { nodePid, postgresPid } of started) {
    for (const pid of [nodePid, postgresPid]) if (running(pid)) process.kill(pid, 'SIGKILL');
  }
  await rm(HOME, { recursive: true, force: true });
});

async function npmStart(): Promise<Started> {
  const npm = spawn('npm', ['start'], { cwd: ROOT, env: cliEnv(undefined, { SLIPWAY_HOME: HOME }), stdio: ['ignore', 'pipe', 'pipe'] });
  const output = finished(npm);
  let stdout = '';
  npm.stdout!.on('data', (chunk) => (stdout += chunk));
  const url = await waitFor('npm start to serve its API', async () => /^HTTP API on (\S+) /m.exec(stdout)?.[1]);
  await waitFor('/readyz to answer', async () => (await fetch(`${url}/readyz`)).ok);
  // A worker's id is host:pid:random.
  const workerId = /^worker (\S+) running/m.exec(stdout)![1]!;
  const service = {
    npm,
    output,
    port: Number(new URL(url).port),
    nodePid: Number(workerId.split(':').at(-2)),
    postgresPid: Number(readFileSync(POSTMASTER_PID, 'utf8').split('\n')[0]),
  };
  started.push(service);
  return service;
}

/** After a clean stop: the service said so, logged no failure, and its process, port and embedded server are all gone. */
async function expectStoppedCleanly(service: Started, reason: string): Promise<CliRun> {
  const run = await service.output;
  expect(run.stdout).toContain(`stopping the HTTP API (${reason})\n`);
  // Its connections close before its embedded server stops: none is terminated under it.
  expect(run.stderr).not.toMatch(/connection failed|terminating connection/);
  expect(run.stdout).toMatch(/\nworker stopped\n$/);
  await waitFor('the node process to exit', async () => !running(service.nodePid));
  await waitFor('the API port to be free', () => portFree(service.port));
  await waitFor('the embedded PostgreSQL to stop', async () => !running(service.postgresPid) && !existsSync(POSTMASTER_PID));
  return run;
}

test('a second start while one runs names the process holding the port, in one line', async () => {
  const service = await npmStart();
  const second = await runCli(['start'], undefined, { SLIPWAY_HOME: HOME, SLIPWAY_API_PORT: String(service.port) });
  expect(second.code).toBe(1);
  expect(second.stdout).toBe('');
  expect(second.stderr).toBe(
    `error: port ${service.port} on 127.0.0.1 is already in use by pid ${service.nodePid} (node ./dist/src/cli/bin.mjs start): ` +
      'stop it, or set SLIPWAY_API_PORT to another port (0 picks a free one)\n',
  );
  // The first one is untouched.
  expect((await fetch(`http://127.0.0.1:${service.port}/readyz`)).ok).toBe(true);

  service.npm.kill('SIGTERM');
  await expectStoppedCleanly(service, 'SIGTERM');
});

test('SIGTERM to npm start stops the service and its embedded PostgreSQL, and npm exits 0', async () => {
  const service = await npmStart();
  service.npm.kill('SIGTERM');
  const run = await expectStoppedCleanly(service, 'SIGTERM');
  expect(run.code).toBe(0);
});

test('npm start killed outright: the service notices npm is gone and stops cleanly', async () => {
  const service = await npmStart();
  service.npm.kill('SIGKILL');
  await expectStoppedCleanly(service, 'parent process exited');
});

/** True while `pid` is a live process (a zombie, exited but not yet reaped, is not). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  // The state follows the command name, which is in parentheses.
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
