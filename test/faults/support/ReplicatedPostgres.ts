import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { EmbeddedDatabase } from '../../../src/db/EmbeddedDatabase.ts';
import type { Logger } from '../../../src/log.ts';
import { waitFor } from '../../helpers/waitFor.ts';

const run = promisify(execFile);

/** The standby's name in the primary's `synchronous_standby_names` and its own `application_name`. */
const STANDBY_NAME = 'standby';

/** The programs of one PostgreSQL build that a primary and its standby need. */
export interface PostgresBuild {
  readonly initdb: string;
  readonly postgres: string;
  readonly pgCtl: string;
  readonly pgBasebackup: string;
}

/**
 * This machine's PostgreSQL build (the bindir `pg_config` names: Debian's
 * postgresql-15 on the CI machine), or why there is none. The embedded
 * package has no `pg_basebackup`, so a standby needs a system build.
 */
export function systemPostgres(): PostgresBuild | string {
  let bindir: string;
  try {
    bindir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    return 'no pg_config on PATH: install a PostgreSQL server build (Debian: postgresql-15)';
  }
  const build = {
    initdb: path.join(bindir, 'initdb'),
    postgres: path.join(bindir, 'postgres'),
    pgCtl: path.join(bindir, 'pg_ctl'),
    pgBasebackup: path.join(bindir, 'pg_basebackup'),
  };
  const missing = Object.values(build).filter((file) => !existsSync(file));
  return missing.length === 0 ? build : `${missing.join(', ')} missing: install a PostgreSQL server build (Debian: postgresql-15)`;
}

/**
 * A primary and a hot standby fed by streaming replication, each a server
 * of its own on a loopback port (started as EmbeddedDatabase starts one:
 * as the `postgres` OS user when we are root). `synchronous` names the
 * standby in the primary's `synchronous_standby_names`, so a commit is
 * acknowledged only once the standby has flushed it; otherwise replication
 * is asynchronous, PostgreSQL's default.
 */
export class ReplicatedPostgres {
  private constructor(
    private readonly build: PostgresBuild,
    readonly primary: EmbeddedDatabase,
    readonly standby: EmbeddedDatabase,
    private readonly homes: { primary: string; standby: string },
    private readonly password: string,
    readonly database: string,
  ) {}

  /**
   * Starts the primary, lets `prepare` write its schema (a plain primary,
   * not yet waiting for any standby), takes a base backup of it, starts the
   * standby from it, and waits until the standby streams (as the
   * synchronous one, if asked).
   */
  static async start(
    home: string,
    log: Logger,
    options: { build: PostgresBuild; synchronous: boolean; database: string; prepare: (primaryUrl: string) => Promise<void> },
  ): Promise<ReplicatedPostgres> {
    const { build, database } = options;
    const homes = { primary: path.join(home, 'primary'), standby: path.join(home, 'standby') };
    const primary = await EmbeddedDatabase.open(homes.primary, log, database, { binaries: build });
    let standby: EmbeddedDatabase | undefined;
    try {
      await options.prepare(primary.url);
      const password = (await readFile(path.join(homes.primary, 'embedded-password'), 'utf8')).trim();
      const primaryPort = Number(new URL(primary.url).port);
      const owner = await serverUser();

      const standbyData = path.join(homes.standby, 'pg');
      // Two calls: a recursive mkdir gives its mode to every directory it makes.
      await mkdir(homes.standby, { recursive: true });
      await mkdir(standbyData, { mode: 0o700 });
      if (owner.uid !== undefined) await chown(standbyData, owner.uid, owner.gid!);
      // -R writes standby.signal and a primary_conninfo; ours (below) replaces the latter to carry the standby's name.
      await run(
        build.pgBasebackup,
        ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standbyData, '-X', 'stream', '-R', '--checkpoint=fast'],
        { ...owner, env: { ...process.env, PGPASSWORD: password } },
      );
      // The standby's server is reached with the primary's password (its roles are the primary's).
      await writeFile(path.join(homes.standby, 'embedded-password'), `${password}\n`, { mode: 0o600 });
      const conninfo = `host=127.0.0.1 port=${primaryPort} user=postgres password=${password} application_name=${STANDBY_NAME}`;
      standby = await EmbeddedDatabase.open(homes.standby, log, database, { binaries: build, settings: [`primary_conninfo=${conninfo}`] });

      const pair = new ReplicatedPostgres(build, primary, standby, homes, password, database);
      if (options.synchronous) {
        await pair.onPrimary(async (client) => {
          await client.query(`alter system set synchronous_standby_names = '${STANDBY_NAME}'`);
          await client.query('select pg_reload_conf()');
        });
      }
      const expected = options.synchronous ? 'sync' : 'async';
      await waitFor(`the standby to stream as ${expected}`, () =>
        pair.onPrimary(async (client) => {
          const { rows } = await client.query('select sync_state from pg_stat_replication where application_name = $1 and state = $2', [
            STANDBY_NAME,
            'streaming',
          ]);
          return rows[0]?.sync_state === expected;
        }),
      );
      return pair;
    } catch (error) {
      await standby?.stop();
      await primary.stop();
      throw error;
    }
  }

  get primaryPort(): number {
    return Number(new URL(this.primary.url).port);
  }

  get standbyPort(): number {
    return Number(new URL(this.standby.url).port);
  }

  /** A URL of this pair's database through TCP at `port` (a proxy's, say): no Unix socket. */
  urlAt(port: number, database = this.database): string {
    return `postgres://postgres:${encodeURIComponent(this.password)}@127.0.0.1:${port}/${database}`;
  }

  /**
   * The primary dies as its machine would: SIGKILL to the postmaster and to
   * every process it started, in one go, so no backend finishes what it was
   * doing or says goodbye. (Each backend leads a process group of its own,
   * so the postmaster's group is not enough; its children are found by
   * their parent pid.)
   */
  async killPrimary(): Promise<void> {
    const pid = Number((await readFile(path.join(this.homes.primary, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    const children = await childrenOf(pid);
    for (const victim of [pid, ...children]) {
      try {
        process.kill(victim, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await waitFor('the primary to be gone', async () => !(await Promise.all([pid, ...children].map(alive))).includes(true));
  }

  /** `pg_ctl promote`, waiting (-w) until the standby takes writes. */
  async promoteStandby(): Promise<void> {
    await run(this.build.pgCtl, ['promote', '-w', '-t', '60', '-D', path.join(this.homes.standby, 'pg')], await serverUser());
  }

  async stop(): Promise<void> {
    await Promise.all([this.primary.stop(), this.standby.stop()]);
  }

  private async onPrimary<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.urlAt(this.primaryPort, 'postgres') });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  }
}

/** The OS user the servers run as: `postgres` when we are root (PostgreSQL refuses root; EmbeddedDatabase made the user), else ourselves. */
async function serverUser(): Promise<{ uid?: number; gid?: number }> {
  if (os.userInfo().uid !== 0) return {};
  return {
    uid: Number((await run('id', ['-u', 'postgres'])).stdout),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout),
  };
}

/** The pids whose parent is `parent`, from /proc (field 4 of /proc/<pid>/stat, after the parenthesised name). */
async function childrenOf(parent: number): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[1]) === parent) found.push(Number(entry));
  }
  return found;
}

/** Running, not gone nor a zombie waiting for its parent to reap it. */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}
