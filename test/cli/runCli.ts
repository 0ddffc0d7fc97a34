import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { staleBuild } from '../../src/cli/builtFrom.mjs';
import { CHECKOUT } from '../helpers/packedPackage.ts';

/**
 * Whether the CLI under test is the build (dist/) rather than the TypeScript
 * source. The build when it is current, as `npm install` and CI's `npm ci`
 * leave it: the same code as the source (staleBuild compares every source
 * file with what the build recorded), without tsx compiling TypeScript at
 * every call. After an edit, until `npm run build`, the source.
 */
export const CLI_RUNS_BUILD = staleBuild(CHECKOUT) === undefined;
const BIN = path.join(CHECKOUT, CLI_RUNS_BUILD ? 'dist' : '', 'src', 'cli', 'bin.mjs');

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Starts the real `slipway` executable against `databaseUrl` (undefined: the
 * embedded database under SLIPWAY_HOME), from a working directory outside the
 * project (the launcher must not depend on it), with `env` added to its
 * environment.
 */
export function spawnCli(args: readonly string[], databaseUrl: string | undefined, env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { cwd: os.tmpdir(), env: cliEnv(databaseUrl, env), stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The environment a CLI under test runs with. */
export function cliEnv(databaseUrl: string | undefined, env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { DATABASE_URL: _ours, ...inherited } = process.env;
  return {
    ...inherited,
    ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }),
    // Port 0: a `start` serves its HTTP API on a free port, never colliding with another test's.
    LOG_LEVEL: 'warn',
    SLIPWAY_API_PORT: '0',
    ...env,
  };
}

/** Collects a started CLI's output until it exits. */
export function finished(child: ChildProcess): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `slipway <args>` to completion. */
export function runCli(args: readonly string[], databaseUrl: string | undefined, env: Record<string, string> = {}): Promise<CliRun> {
  return finished(spawnCli(args, databaseUrl, env));
}

/** The stdout of a --json run, parsed. */
export function parseJson<T = any>(run: CliRun): T {
  return JSON.parse(run.stdout) as T;
}
