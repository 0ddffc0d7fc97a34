import { readdir, readFile } from 'node:fs/promises';
import { sql } from 'kysely';
import type { Db } from '../src/db/Database.ts';

/**
 * CPU seconds of processes, from /proc (Linux only): what the profiling and
 * the check-pass benchmarks read around a measured window.
 */

/** Linux's USER_HZ, the unit of /proc's CPU times. */
const CLOCK_TICKS = 100;

/** The PostgreSQL server process (the postmaster) behind a database handle's connections. */
export async function postmasterPid(db: Db): Promise<number> {
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  return (await procStat(rows[0]!.pid)).ppid;
}

/**
 * One process's parent and CPU seconds (user + system), and those of its
 * children that have exited and been waited for, from /proc/<pid>/stat.
 */
async function procStat(pid: number): Promise<{ ppid: number; cpuSeconds: number; systemSeconds: number; exitedChildrenCpuSeconds: number }> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name, which is in parentheses and may hold spaces.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const seconds = (...at: number[]) => at.reduce((sum, i) => sum + Number(fields[i]), 0) / CLOCK_TICKS;
  return { ppid: Number(fields[1]), cpuSeconds: seconds(11, 12), systemSeconds: seconds(12), exitedChildrenCpuSeconds: seconds(13, 14) };
}

/**
 * The CPU seconds of these processes together, and the part of them spent
 * in the kernel (system calls, page faults): what a V8 CPU profile cannot
 * tell, as it samples a thread whenever it is not idle, so a write the
 * process then waited in for a core counts in full there.
 */
export async function cpuOf(pids: readonly number[]): Promise<{ seconds: number; kernelSeconds: number }> {
  const stats = await Promise.all(pids.map(procStat));
  return {
    seconds: stats.reduce((sum, s) => sum + s.cpuSeconds, 0),
    kernelSeconds: stats.reduce((sum, s) => sum + s.systemSeconds, 0),
  };
}

/**
 * The postmaster's CPU and that of every process it runs (backends, WAL
 * writer, checkpointer…), those that have exited included: a backend whose
 * client closed its connection during the window (a pool letting an idle
 * one go) is no longer in /proc, but the postmaster, which waits for it,
 * has its CPU in its own children's times.
 */
export async function serverCpu(postmaster: number): Promise<number> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
  const stats = await Promise.all(
    pids.map((pid) =>
      procStat(pid)
        .then((s) => ({ pid, ...s }))
        .catch(() => undefined),
    ),
  );
  return stats
    .filter((s) => s && (s.pid === postmaster || s.ppid === postmaster))
    .reduce((sum, s) => sum + s!.cpuSeconds + (s!.pid === postmaster ? s!.exitedChildrenCpuSeconds : 0), 0);
}
