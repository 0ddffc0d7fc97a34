import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { staleBuild } from '../src/cli/builtFrom.mjs';
import { freePort } from './freePort.ts';
import { pollUntil } from './measure.ts';
import type { SlipwayWorkers } from './SlipwaySystem.ts';

const CHECKOUT = fileURLToPath(new URL('..', import.meta.url));
/** The `slipway` executable as `npm start` runs it: the build, not the TypeScript source. */
const BIN = path.join(CHECKOUT, 'dist', 'src', 'cli', 'bin.mjs');
/** Migrations (none left to apply) and start-up. */
const READY_TIMEOUT_MS = 2 * 60_000;
/** Longer than a worker's default shutdown grace (SLIPWAY_SHUTDOWN_GRACE_MS, 30 s): past it, the service is stuck. */
const STOP_TIMEOUT_MS = 90_000;
/** The end of its output kept for the error of a start or stop that failed. */
const OUTPUT_KEPT = 8 * 1024;

/**
 * `slipway start` in a process of its own, as users run it: the HTTP API and
 * one worker, configured by the environment alone. Its SLIPWAY_HOME is a
 * fresh directory (removed when it stops), so it shares nothing with
 * another Slipway on the machine; LOG_LEVEL=warn, so its log costs what a
 * quiet production log does.
 */
export class ServiceProcess implements SlipwayWorkers {
  private readonly died: Promise<never>;
  private stopping = false;
  private output = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly home: string,
    /** Where its API answers, e.g. http://127.0.0.1:41234. */
    readonly url: string,
  ) {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding('utf8');
      stream?.on('data', (text: string) => {
        this.output = (this.output + text).slice(-OUTPUT_KEPT);
      });
    }
    this.died = new Promise<never>((_, reject) => {
      child.once('exit', (code, signal) => {
        if (!this.stopping) reject(new Error(`slipway start exited unexpectedly (${signal ?? code})${this.lastOutput()}`));
      });
    });
    // Reported by the next whileRunning(); nobody may be waiting at the moment it dies.
    this.died.catch(() => undefined);
  }

  /** Starts it on the database at `databaseUrl`, with its home under `parentDir`, and waits until GET /readyz answers 200. */
  static async start(databaseUrl: string, parentDir: string): Promise<ServiceProcess> {
    // A stale build would run the source through tsx (src/cli/bin.mjs), which is not what users run.
    const stale = staleBuild(CHECKOUT);
    if (stale !== undefined) throw new Error(`${stale}: run npm run build, so that the benchmark runs what npm start runs`);
    await mkdir(parentDir, { recursive: true });
    const home = await mkdtemp(path.join(parentDir, 'service-'));
    const host = process.env.SLIPWAY_API_HOST ?? '127.0.0.1';
    const port = await freePort(host);
    const child = spawn(process.execPath, [BIN, 'start'], {
      env: { ...process.env, DATABASE_URL: databaseUrl, SLIPWAY_API_PORT: String(port), SLIPWAY_HOME: home, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const service = new ServiceProcess(child, home, `http://${host}:${port}`);
    try {
      await service.whileRunning(pollUntil('slipway start to be ready', () => service.ready(), READY_TIMEOUT_MS, 100));
    } catch (error) {
      await service.kill();
      throw error;
    }
    return service;
  }

  /** Waits for `work`, or fails as soon as the service's process exits. */
  whileRunning<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.died]);
  }

  /** Stops it as a supervisor would, with SIGTERM, and fails unless it exits 0 in time. */
  async stop(): Promise<void> {
    this.stopping = true;
    try {
      if (this.child.exitCode === null && this.child.signalCode === null) {
        const exited = once(this.child, 'exit');
        this.child.kill('SIGTERM');
        const stopped = await Promise.race([exited, sleep(STOP_TIMEOUT_MS, undefined)]);
        if (!stopped) throw new Error(`slipway start did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM${this.lastOutput()}`);
      }
      if (this.child.exitCode !== 0) {
        throw new Error(`slipway start exited ${this.child.signalCode ?? this.child.exitCode} on SIGTERM, not 0${this.lastOutput()}`);
      }
    } finally {
      await this.kill();
    }
  }

  /** Ends it at once (for a run that failed) and removes its home. */
  async kill(): Promise<void> {
    this.stopping = true;
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = once(this.child, 'exit');
      this.child.kill('SIGKILL');
      await exited;
    }
    await rm(this.home, { recursive: true, force: true });
  }

  private async ready(): Promise<boolean> {
    try {
      const answer = await fetch(`${this.url}/readyz`);
      await answer.body?.cancel();
      return answer.status === 200;
    } catch {
      // Not listening yet.
      return false;
    }
  }

  private lastOutput(): string {
    return this.output.trim() === '' ? '' : `; its last output:\n${this.output.trimEnd()}`;
  }
}
