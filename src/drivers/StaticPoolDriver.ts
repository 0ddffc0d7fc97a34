import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import type { Db } from '../db/Database.ts';
import { statesAccepting } from '../domain/lifecycle.ts';
import { LabelsSchema, matches, resourceLabels } from '../domain/labels.ts';
import {
  type Driver,
  type DriverFactory,
  type DriverResult,
  type DriverServices,
  distinctBy,
  PermanentDriverError,
  type Reconciliation,
  type ResourceCall,
  TransientDriverError,
} from './Driver.ts';
import { Argv, ExecDriver } from './ExecDriver.ts';

const Entry = z
  .object({
    /** Unique within the pool: a host name, an account, any named thing. */
    name: z.string().min(1).max(200),
    /** How many leases the entry takes at once. */
    slots: z.number().int().min(1).max(10_000).default(1),
    /** Copied into its resource's and its leases' attributes (an address, a port...). */
    attributes: z.record(z.string(), z.json()).default({}),
    /**
     * Its resource's labels (the blueprint's go over them), which lease
     * selectors are matched against. No default filled in: an entry's
     * definition is compared with the one its resource claimed, and an
     * entry claimed before labels existed has none.
     */
    labels: LabelsSchema.optional(),
  })
  .strict();
type Entry = z.infer<typeof Entry>;

/**
 * A probe run to check each entry's resource, as the exec driver runs its
 * checkResource program (the same call on stdin, with the entry's name and
 * attributes in the resource's attributes; exit 0 printing nothing is
 * healthy). Without one, entries are trusted as listed.
 */
const Probe = z
  .object({
    command: Argv,
    timeoutMs: z.number().int().min(100).max(3_600_000).default(10_000),
    env: z.record(z.string(), z.string().max(32_768)).default({}),
  })
  .strict();

const Settings = z
  .object({
    probe: Probe.optional(),
    entries: z
      .array(Entry)
      .min(1, 'list at least one entry (disable the blueprint to take the whole pool out of use)')
      .max(10_000)
      .refine(distinctBy('name'), 'entry names must be unique'),
  })
  .strict();
type Settings = z.infer<typeof Settings>;

/** A failed claim is tried again this many times before the call yields (others claimed the same entries meanwhile). */
const CLAIM_ATTEMPTS = 5;
/** When every entry is taken, look again after this long. */
const NO_FREE_ENTRY_RETRY_MS = 30_000;

// Claims the first entry of the blueprint's CURRENT settings that no resource
// stands for, those named in $3 (the ones matching the selector of the lease
// the resource is made for) first. The settings are read FOR SHARE in the same statement: a
// settings update holds the blueprint's row while it decides which claims to
// retire, so a claim is made either before that decision (and is seen by it)
// or after it (and sees the new settings), never in between. The primary key
// settles two resources racing for one entry: the loser claims nothing and
// tries the next entry.
const CLAIM_FIRST_FREE_ENTRY = `
  with blueprint as (
    select settings from blueprints where id = $1 for share
  ), free as (
    select e.definition, e.position
    from blueprint, jsonb_array_elements(blueprint.settings -> 'entries') with ordinality as e (definition, position)
    where not exists (
      select 1 from static_pool_claims c where c.blueprint_id = $1 and c.entry = e.definition ->> 'name'
    )
    order by (e.definition ->> 'name') = any($3::text[]) desc, e.position
    limit 1
  )
  insert into static_pool_claims (blueprint_id, entry, resource_id, definition)
  select $1, definition ->> 'name', $2, definition from free
  on conflict do nothing
  returning definition`;

const OWN_CLAIM = `select definition from static_pool_claims where resource_id = $1`;
const DROP_CLAIM = `delete from static_pool_claims where resource_id = $1`;
const CLAIMS = `select entry, resource_id from static_pool_claims where blueprint_id = $1 order by entry`;
// Only the claim as listed: by the resource it was made for, as an entry
// freed meanwhile and claimed again belongs to another resource.
const DROP_LISTED_CLAIM = `delete from static_pool_claims where blueprint_id = $1 and entry = $2 and resource_id = $3`;

async function definitionOf(services: DriverServices, text: string, values: unknown[]): Promise<Entry | undefined> {
  const result = (await services.query(text, values)) as { rows: Array<{ definition: Entry }> };
  return result.rows[0]?.definition;
}

/**
 * The entry a resource stands for: the one it already claimed (calls are
 * repeated), else a free one, one whose labels match `preferred` if any is
 * free (a resource made for a lease with a selector). Without a matching one
 * free it claims another: the lease is refused a slot there and asks again,
 * and the resource serves the leases it does match.
 */
async function claimEntry(services: DriverServices, call: ResourceCall, settings: Settings): Promise<Entry> {
  const { selector } = call.resource;
  const preferred = selector
    ? settings.entries.filter((e) => matches(selector, resourceLabels(e.labels ?? {}, call.blueprint.labels))).map((e) => e.name)
    : [];
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const entry =
      (await definitionOf(services, OWN_CLAIM, [call.resource.id])) ??
      (await definitionOf(services, CLAIM_FIRST_FREE_ENTRY, [call.blueprint.id, call.resource.id, preferred]));
    if (entry) return entry;
  }
  throw new TransientDriverError('every entry of the pool stands for a live resource; waiting for one to be freed', NO_FREE_ENTRY_RETRY_MS);
}

/**
 * A fixed list of named things (hosts, accounts...) from the blueprint's
 * settings, each with its number of lease slots. Each resource stands for one
 * entry: allocating a resource claims a free entry, destroying it frees the
 * entry. Nothing is created or removed in the outside world; leases get the
 * entry's name and attributes.
 *
 * When the settings change (`slipway blueprint update`), `reconcile` retires
 * the resources of entries that were removed or changed (they take no new
 * leases and are destroyed when their leases end) and sets the blueprint's
 * resource limit to the number of entries, so added entries become usable.
 *
 * What it holds is its claims: each names the resource it was made for. A
 * claim whose resource is gone keeps its entry from use; destroying that
 * orphan drops the claim, and the entry is free again.
 */
export const StaticPoolDriver: DriverFactory<Settings> = {
  name: 'static-pool',
  description: 'a fixed list of named entries (hosts...) from the settings, each with its own number of lease slots',
  settingsSchema: Settings,
  possibleLabels: (settings) => settings.entries.map((e) => e.labels ?? {}),
  create(settings, services) {
    const probe = settings.probe
      ? ExecDriver.create(
          ExecDriver.settingsSchema.parse({
            commands: { checkResource: settings.probe.command },
            timeoutMs: settings.probe.timeoutMs,
            env: settings.probe.env,
          }),
          services,
        ).checkResource
      : undefined;
    return {
      ...(probe ? { checkResource: probe } : {}),
      async allocateResource(call) {
        const entry = await claimEntry(services, call, settings);
        return { attributes: { ...entry.attributes, entry: entry.name }, capacity: entry.slots, labels: entry.labels ?? {} };
      },
      async activateResource() {
        return {};
      },
      async destroyResource(call) {
        await services.query(DROP_CLAIM, [call.resource.id]);
        return {};
      },
      async acquireLease(call) {
        // The lease carries what its holder needs to use the entry.
        return { attributes: call.resource.attributes as DriverResult['attributes'] };
      },
      async activateLease() {
        return {};
      },
      async releaseLease() {
        return {};
      },
      async listResources(call) {
        const { rows } = (await services.query(CLAIMS, [call.blueprint.id])) as { rows: Array<{ entry: string; resource_id: string }> };
        return { resources: rows.map((c) => ({ id: c.entry, resourceId: Number(c.resource_id), attributes: { entry: c.entry } })) };
      },
      async destroyOrphan(call) {
        const { orphan } = call;
        if (orphan.resourceId === undefined) throw new PermanentDriverError(`entry "${orphan.id}": a claim always names its resource`);
        await services.query(DROP_LISTED_CLAIM, [call.blueprint.id, orphan.id, orphan.resourceId]);
        return {};
      },
    } satisfies Driver;
  },

  async reconcile(trx: Db, blueprintId: number, settings: Settings): Promise<Reconciliation> {
    const claims = await trx
      .selectFrom('static_pool_claims as c')
      .innerJoin('resources as r', 'r.id', 'c.resource_id')
      .select(['c.entry', 'c.definition', 'r.id'])
      .where('c.blueprint_id', '=', blueprintId)
      // Those that can still be retired: a resource in maintenance holds its entry too.
      .where('r.state', 'in', statesAccepting('resource', 'retire'))
      .orderBy('r.id')
      .execute();
    const wanted = new Map(settings.entries.map((entry) => [entry.name, entry]));
    const retire = claims.flatMap((claim) => {
      const now = wanted.get(claim.entry);
      if (!now) return [{ resourceId: claim.id, reason: `entry "${claim.entry}" was removed from the settings` }];
      // The claim holds the entry as it was written; compared as read, so a default written out or left out is no change.
      if (!isDeepStrictEqual(now, Entry.parse(claim.definition)))
        return [{ resourceId: claim.id, reason: `entry "${claim.entry}" was changed in the settings` }];
      return [];
    });
    // Resources still waiting to claim an entry claim from these settings;
    // those beyond the entries left free could never claim one.
    const claimed = new Set(claims.map((claim) => claim.entry));
    const free = settings.entries.filter((entry) => !claimed.has(entry.name)).length;
    const unclaimed = await trx
      .selectFrom('resources as r')
      .select('r.id')
      .where('r.blueprint_id', '=', blueprintId)
      .where('r.state', '=', 'pending')
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('static_pool_claims as c').select('c.entry').whereRef('c.resource_id', '=', 'r.id'))),
      )
      .orderBy('r.id')
      .execute();
    for (const { id } of unclaimed.slice(free)) retire.push({ resourceId: id, reason: 'no entry is left for it in the settings' });
    return { retire, maxResources: settings.entries.length };
  },
};
