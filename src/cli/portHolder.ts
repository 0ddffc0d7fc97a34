import { readdir, readFile, readlink } from 'node:fs/promises';

/** Socket tables that list listening TCP sockets, IPv4 and IPv6 (Linux). */
const SOCKET_TABLES = ['/proc/net/tcp', '/proc/net/tcp6'];
/** The `st` column's value for a listening socket. */
const LISTEN = '0A';

export interface PortHolder {
  readonly pid: number;
  /** Its command line, e.g. `node ./dist/src/cli/bin.mjs start`. */
  readonly command: string;
}

/**
 * The process listening on a TCP port, so that a refused listen can say who
 * is in the way. Read from /proc: the socket's inode from the socket tables,
 * then the process with that socket among its open files. Undefined where
 * there is no /proc, or the holder's files are not ours to read (another
 * user's process, when we are not root).
 */
export async function findPortHolder(port: number): Promise<PortHolder | undefined> {
  const inodes = await listeningInodes(port);
  if (inodes.size === 0) return undefined;
  const pids = (await readdir('/proc').catch(() => [])).filter((name) => /^\d+$/.test(name));
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
    for (const fd of fds) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      if (!inodes.has(/^socket:\[(\d+)\]$/.exec(target)?.[1] ?? '')) continue;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      return { pid: Number(pid), command: cmdline.split('\0').filter(Boolean).join(' ') };
    }
  }
  return undefined;
}

/** The inodes of the sockets listening on `port`, on any address. */
async function listeningInodes(port: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  for (const table of SOCKET_TABLES) {
    const text = await readFile(table, 'utf8').catch(() => '');
    // Columns: sl, local_address (hex address:hex port), rem_address, st, ..., inode (the 10th).
    for (const line of text.split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      const localPort = Number.parseInt(columns[1]?.split(':')[1] ?? '', 16);
      if (localPort === port && columns[3] === LISTEN && columns[9] !== undefined) inodes.add(columns[9]);
    }
  }
  return inodes;
}
