import { execFileSync } from 'node:child_process';
import os from 'node:os';
import type pg from 'pg';
import { z } from 'zod';

export const MachineSchema = z.object({
  cores: z.number(),
  cpuModel: z.string(),
  memoryBytes: z.number(),
  platform: z.string(),
  node: z.string(),
  /** The durability settings every transaction of the run committed under. */
  synchronousCommit: z.string(),
  fsync: z.string(),
  /** The code measured: its commit, marked -dirty when the working tree had changes. */
  revision: z.string(),
  /** 1-minute load average when the run began: well above 0 means something else competes for the cores. */
  loadAverage: z.number(),
});
export type MachineInfo = z.infer<typeof MachineSchema>;

/** What the figures depend on: the host, the code, and the server's durability settings (its release: server.ts). */
export async function describeMachine(pool: pg.Pool): Promise<MachineInfo> {
  const { rows } = await pool.query<{ synchronous_commit: string; fsync: string }>(
    `select current_setting('synchronous_commit') as synchronous_commit, current_setting('fsync') as fsync`,
  );
  const settings = rows[0]!;
  return {
    cores: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryBytes: os.totalmem(),
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    synchronousCommit: settings.synchronous_commit,
    fsync: settings.fsync,
    revision: gitRevision(),
    loadAverage: os.loadavg()[0]!,
  };
}

export function gitRevision(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown (not a git checkout)';
  }
}
