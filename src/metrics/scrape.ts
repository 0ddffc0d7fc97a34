import { createHash, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Database, Db } from '../db/Database.ts';
import { liveWorkerCondition } from '../db/liveWorkers.ts';
import { registry, setPoolGauges, setStateGauges, type StateSnapshot } from './metrics.ts';

/** How long one reading of the database's gauges serves scrapes: Prometheus scraping every few seconds costs one query per this. */
export const STATE_CACHE_MS = 5000;

export interface ScrapeSettings {
  readonly staleAfterMs: number;
  readonly heartbeatMs: number;
}

/** A scrape's answer: Prometheus's text format. */
export interface Scrape {
  readonly contentType: string;
  readonly body: string;
}

/**
 * Scrapes this process's registry: the pool gauges from `database`'s pool,
 * the database-wide gauges from one query (cached for STATE_CACHE_MS per
 * database), and every counter and histogram as the process keeps them.
 */
export async function scrapeMetrics(database: Pick<Database, 'db' | 'pool'>, settings: ScrapeSettings): Promise<Scrape> {
  setPoolGauges(database.pool);
  setStateGauges(await cachedState(database.db, settings));
  return { contentType: registry.contentType, body: await registry.metrics() };
}

const cache = new WeakMap<Db, { at: number; state: Promise<StateSnapshot> }>();

function cachedState(db: Db, settings: ScrapeSettings): Promise<StateSnapshot> {
  const hit = cache.get(db);
  if (hit && Date.now() - hit.at < STATE_CACHE_MS) return hit.state;
  const state = readState(db, settings);
  cache.set(db, { at: Date.now(), state });
  // A failed reading is not kept: the next scrape tries again.
  state.catch(() => cache.delete(db));
  return state;
}

interface StateRow {
  family: 'backlog' | 'overdue' | 'lease' | 'resource' | 'waiting' | 'orphan' | 'workers';
  blueprint: string | null;
  state: string | null;
  n: number;
}

/**
 * Every database-wide gauge in one statement. Each part reads an index:
 * unsettled commands (a partial index of only those), leases and resources by
 * blueprint and state, the waiters' queue, and the small workers table.
 */
export async function readState(db: Db, { staleAfterMs, heartbeatMs }: ScrapeSettings): Promise<StateSnapshot> {
  const stale = sql`make_interval(secs => ${staleAfterMs / 1000})`;
  const { rows } = await sql<StateRow>`
    select 'backlog' as family, null as blueprint,
           case when status = 'running' then 'running' when not_before <= now() then 'queued' else 'scheduled' end as state,
           count(*)::int as n
      from commands where status in ('queued', 'running') group by 3
    union all
    select 'overdue', null, null, count(*)::int
      from commands
     where status in ('queued', 'running')
       and (case when status = 'running' then coalesce(started_at, not_before) else not_before end) < now() - ${stale}
    union all
    select 'lease', b.name, l.state, count(*)::int
      from leases l join blueprints b on b.id = l.blueprint_id where l.state <> 'destroyed' group by b.name, l.state
    union all
    select 'resource', b.name, r.state, count(*)::int
      from resources r join blueprints b on b.id = r.blueprint_id where r.state <> 'destroyed' group by b.name, r.state
    union all
    select 'waiting', b.name, null, count(*)::int
      from blueprint_waiters w join leases l on l.id = w.lease_id and l.state = 'pending'
      join blueprints b on b.id = w.blueprint_id group by b.name
    union all
    select 'orphan', b.name, case when o.passes >= 2 then 'again' else 'once' end, count(*)::int
      from orphans o join blueprints b on b.id = o.blueprint_id group by 2, 3
    union all
    select 'workers', null, null, count(*)::int
      from workers where ${liveWorkerCondition(heartbeatMs)}
  `.execute(db);
  const of = (family: StateRow['family']) => rows.filter((r) => r.family === family);
  const count = (family: StateRow['family'], state?: string) => of(family).find((r) => state === undefined || r.state === state)?.n ?? 0;
  const byBlueprint = (family: StateRow['family']) => of(family).map((r) => ({ blueprint: r.blueprint!, state: r.state!, count: r.n }));
  return {
    backlog: { queued: count('backlog', 'queued'), scheduled: count('backlog', 'scheduled'), running: count('backlog', 'running') },
    overdue: count('overdue'),
    leases: byBlueprint('lease'),
    resources: byBlueprint('resource'),
    waitingLeases: of('waiting').map((r) => ({ blueprint: r.blueprint!, count: r.n })),
    orphans: of('orphan').map((r) => ({ blueprint: r.blueprint!, seen: r.state!, count: r.n })),
    liveWorkers: count('workers'),
  };
}

/** What a scrape request is answered: the metrics, or 401 when a token is configured and the request does not carry it. */
export async function answerScrape(
  database: Pick<Database, 'db' | 'pool'>,
  settings: ScrapeSettings & { readonly token: string | undefined },
  authorization: string | undefined,
): Promise<Scrape & { status: number }> {
  if (settings.token !== undefined && !sameSecret(authorization ?? '', `Bearer ${settings.token}`)) {
    return {
      status: 401,
      contentType: 'text/plain; charset=utf-8',
      body: 'this endpoint needs "Authorization: Bearer <SLIPWAY_METRICS_TOKEN>" (Prometheus: authorization.credentials in the scrape config)\n',
    };
  }
  return { status: 200, ...(await scrapeMetrics(database, settings)) };
}

/** Compares without leaking, through timing, how much of the token a guess got right. */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The scrape settings of a process's configuration. */
export function scrapeSettings(config: Config): ScrapeSettings & { readonly token: string | undefined } {
  return { staleAfterMs: config.SLIPWAY_STALE_AFTER_MS, heartbeatMs: config.SLIPWAY_HEARTBEAT_MS, token: config.SLIPWAY_METRICS_TOKEN };
}
