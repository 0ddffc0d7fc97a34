#!/usr/bin/env node
// A directory-backed workspace for Slipway's `exec` driver, and a template
// for writing your own program: one program serving every step, told which
// by the JSON document on stdin.
//
//   resource  = <root>/<blueprint>/resource-<id>          (allocate / destroy)
//   lease     = <root>/<blueprint>/resource-<id>/slot-<n> (acquire / release)
//   listing   = every entry of <root>/<blueprint>         (listResources / destroyOrphan)
//
// <root> comes from the blueprint's settings: {"params": {"root": "/srv/ws"}}.
// Every step is idempotent (Slipway may repeat a call with the same
// idempotency key): mkdir -p and rm -rf are safe to repeat.
// Exit codes: 0 done, 75 try again later, anything else a permanent failure.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const call = JSON.parse(input);

const root = call.blueprint.settings.params?.root;
if (typeof root !== 'string' || !path.isAbsolute(root)) {
  console.error('settings.params.root must be an absolute directory path');
  process.exit(64); // EX_USAGE: permanent, fixing the settings is the only cure
}
const blueprintDir = path.join(root, call.blueprint.name);
// A listing names no resource: these are for the steps that do.
const resourceDir = () => path.join(blueprintDir, `resource-${call.resource.id}`);
const slotDir = () => path.join(resourceDir(), `slot-${call.slot}`);

// Each step prints its result: attributes merged into the resource or lease.
const steps = {
  async allocateResource() {
    await mkdir(resourceDir(), { recursive: true });
    return { attributes: { path: resourceDir() } };
  },
  async destroyResource() {
    await rm(resourceDir(), { recursive: true, force: true });
    return {};
  },
  async acquireLease() {
    await mkdir(slotDir(), { recursive: true });
    // The holder is written as data, never interpolated into a command.
    await writeFile(path.join(slotDir(), '.slipway-lease.json'), JSON.stringify({ lease: call.lease.id, holder: call.lease.holder }));
    return { attributes: { path: slotDir() } };
  },
  async releaseLease() {
    await rm(slotDir(), { recursive: true, force: true });
    return {};
  },
  // What it holds: each entry of the blueprint's directory, naming the
  // resource it was made for where its name says so. Only looks.
  async listResources() {
    const names = await readdir(blueprintDir).catch((error) => (error.code === 'ENOENT' ? [] : Promise.reject(error)));
    const resources = names.map((name) => {
      const entry = path.join(blueprintDir, name);
      const made = /^resource-([1-9][0-9]*)$/.exec(name);
      return { id: entry, ...(made ? { resourceId: Number(made[1]) } : {}), attributes: { path: entry } };
    });
    return { resources };
  },
  // An orphan, as listed: only an entry of the blueprint's directory.
  async destroyOrphan() {
    const entry = path.resolve(call.orphan.id);
    if (path.dirname(entry) !== blueprintDir) {
      console.error(`refusing to remove ${entry}: not in ${blueprintDir}`);
      process.exit(64);
    }
    await rm(entry, { recursive: true, force: true });
    return {};
  },
};

const step = steps[call.operation];
if (!step) {
  console.error(`workspace.mjs does not handle ${call.operation}; leave it out of the blueprint's commands`);
  process.exit(64);
}
process.stdout.write(JSON.stringify(await step()));
