import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import {
  type Driver,
  type DriverCall,
  type DriverFactory,
  type LeaseCall,
  type ListCall,
  PermanentDriverError,
  type ResourceCall,
  type SlotCall,
  type SlotListCall,
} from './Driver.ts';

/** A resource's directory name, and the resource id in it. */
const RESOURCE_DIR = /^resource-([1-9][0-9]*)$/;
/** A slot's directory name in its resource's, and the slot's number. */
const SLOT_DIR = /^slot-(0|[1-9][0-9]*)$/;

const Settings = z
  .object({
    /** Where resources live: <root>/<blueprint>/resource-<id>/slot-<n>. */
    root: z.string().min(1, 'root must name a directory'),
  })
  .strict();
type Settings = z.infer<typeof Settings>;

/**
 * Real directories: a resource is a directory, each of its lease slots a
 * subdirectory. Acquire makes the slot directory, release empties it (the
 * lease's files go), destroy removes the resource's directory. Every step is
 * idempotent: mkdir -p and rm -rf are safe to repeat. It lists everything in
 * the blueprint's directory: `resource-<id>` names the resource it was made
 * for, anything else was put there by hand and no resource stands for it;
 * and a resource's slots, its `slot-<n>` directories.
 */
export const DirectoryDriver: DriverFactory<Settings> = {
  name: 'directory',
  description: 'resources are directories under a root; leases get one of their slot subdirectories',
  settingsSchema: Settings,
  // It reports no labels: its resources have the blueprint's.
  possibleLabels: () => [{}],
  create(settings) {
    const root = path.resolve(settings.root);
    const blueprintDir = (call: DriverCall | ListCall) => path.join(root, call.blueprint.name);
    const resourceDir = (call: ResourceCall | LeaseCall | SlotListCall) => {
      const dir = path.join(blueprintDir(call), `resource-${call.resource.id}`);
      // Names come from validated blueprint names and numeric ids, so this
      // cannot escape the root; the check makes that explicit.
      if (!dir.startsWith(root + path.sep)) throw new PermanentDriverError(`refusing to use ${dir} outside ${root}`);
      return dir;
    };
    const slotDir = (call: LeaseCall | SlotCall) => path.join(resourceDir(call), `slot-${call.slot}`);
    /** A directory's entries; none when it does not exist. */
    const entries = async (dir: string) => {
      try {
        return (await readdir(dir)).sort();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    };
    const emptySlot = async (call: LeaseCall | SlotCall) => {
      await rm(slotDir(call), { recursive: true, force: true });
      return {};
    };

    const driver: Driver = {
      async allocateResource(call) {
        const dir = resourceDir(call);
        await mkdir(dir, { recursive: true });
        return { attributes: { path: dir } };
      },
      async activateResource(call) {
        const dir = resourceDir(call);
        await writeFile(
          path.join(dir, '.slipway-resource.json'),
          JSON.stringify({ resource: call.resource.id, blueprint: call.blueprint.name, slots: call.resource.capacity }),
        );
        return {};
      },
      async destroyResource(call) {
        await rm(resourceDir(call), { recursive: true, force: true });
        return {};
      },
      async acquireLease(call) {
        const dir = slotDir(call);
        await mkdir(dir, { recursive: true });
        return { attributes: { path: dir } };
      },
      async activateLease(call) {
        await writeFile(path.join(slotDir(call), '.slipway-lease.json'), JSON.stringify({ lease: call.lease.id, holder: call.lease.holder }));
        return {};
      },
      // The lease's files go with its slot directory; the next lease on this
      // slot starts from an empty one.
      releaseLease: emptySlot,
      // Whatever the last lease left goes: its release already removed the
      // slot's directory, cleaning makes sure (of files written after it).
      cleanSlot: emptySlot,
      // The resource is its directory: there, it is healthy; removed (by
      // someone, or with its disk), it is gone.
      async checkResource(call) {
        const dir = resourceDir(call);
        try {
          return (await stat(dir)).isDirectory() ? { health: 'healthy' } : { health: 'gone', message: `${dir} is not a directory` };
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { health: 'gone', message: `${dir} does not exist` };
          throw error;
        }
      },
      async listResources(call) {
        const dir = blueprintDir(call);
        return {
          resources: (await entries(dir)).map((name) => {
            const made = RESOURCE_DIR.exec(name);
            const entry = path.join(dir, name);
            return { id: entry, ...(made ? { resourceId: Number(made[1]) } : {}), attributes: { path: entry } };
          }),
        };
      },
      // Only what it listed: an entry directly in the blueprint's directory.
      async destroyOrphan(call) {
        const entry = path.resolve(call.orphan.id);
        if (path.dirname(entry) !== blueprintDir(call)) {
          throw new PermanentDriverError(`refusing to remove ${entry}: not in ${blueprintDir(call)}`);
        }
        await rm(entry, { recursive: true, force: true });
        return {};
      },
      // Its other files (.slipway-resource.json) are the resource's, not a slot's.
      async listSlots(call) {
        const dir = resourceDir(call);
        return {
          slots: (await entries(dir)).flatMap((name) => {
            const slot = SLOT_DIR.exec(name);
            return slot ? [{ id: path.join(dir, name), slot: Number(slot[1]) }] : [];
          }),
        };
      },
    };
    return driver;
  },
};
