#!/usr/bin/env node
// A directory-backed workspace for Slipway's `exec` driver, and a template
// for writing your own program: one program serving every step, told which
// by the JSON document on stdin.
//
//   resource  = <root>/<blueprint>/resource-<id>          (allocate / destroy)
//   lease     = <root>/<blueprint>/resource-<id>/slot-<n> (acquire / release)
//
// <root> comes from the blueprint's settings: {"params": {"root": "/srv/ws"}}.
// Every step is idempotent (Slipway may repeat a call with the same
// idempotency key): mkdir -p and rm -rf are safe to repeat.
// Exit codes: 0 done, 75 try again later, anything else a permanent failure.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const call = JSON.parse(input);

const root = call.blueprint.settings.params?.root;
if (typeof root !== 'string' || !path.isAbsolute(root)) {
  console.error('settings.params.root must be an absolute directory path');
  process.exit(64); // EX_USAGE: permanent, fixing the settings is the only cure
}
const resourceDir = path.join(root, call.blueprint.name, `resource-${call.resource.id}`);
const slotDir = () => path.join(resourceDir, `slot-${call.slot}`);

// Each step prints its result: attributes merged into the resource or lease.
const steps = {
  async allocateResource() {
    await mkdir(resourceDir, { recursive: true });
    return { attributes: { path: resourceDir } };
  },
  async destroyResource() {
    await rm(resourceDir, { recursive: true, force: true });
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
};

const step = steps[call.operation];
if (!step) {
  console.error(`workspace.mjs does not handle ${call.operation}; leave it out of the blueprint's commands`);
  process.exit(64);
}
process.stdout.write(JSON.stringify(await step()));
