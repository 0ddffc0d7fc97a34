import type { Db } from '../db/Database.ts';
import { appendedKind, commandKindSpec, versionFor } from '../domain/commandKinds.ts';
import { UnsupportedVersionError } from '../domain/errors.ts';
import { validateDriverSettings } from '../drivers/registry.ts';
import { findBlueprint } from '../read/blueprints.ts';
import { liveHandlers } from '../db/liveWorkers.ts';
import type { AppendRequest } from './appendCommand.ts';
import type { ObjectRef } from '../db/objectTables.ts';

type AdmissionCheck = (trx: Db, target: ObjectRef, payload: Record<string, unknown>) => Promise<void>;

/**
 * What a command's payload schema cannot say because it depends on the
 * target, checked before a command from outside is queued (appendCommand),
 * so a mistake is refused with a 4xx or a one-line CLI error and nothing is
 * written. The drain checks again when it applies the command: what held at
 * the append may not hold by then.
 */
const ADMISSION_CHECKS: Readonly<Record<string, AdmissionCheck>> = {
  // New driver settings must be ones the blueprint's driver takes.
  'blueprint:update_settings': async (trx, target, payload) => {
    validateDriverSettings((await findBlueprint(trx, target.id)).driver, payload.settings);
  },
};

/**
 * Checks a command from outside before it is queued: that some live worker
 * runs its kind and version, then its kind's own admission check, if it has
 * one. Throws UnsupportedVersionError, InvalidInputError or NotFoundError to
 * refuse it. The request's kind and version are known to this build
 * (appendCall checked them).
 */
export async function admit(trx: Db, request: AppendRequest): Promise<void> {
  const { target } = request;
  // The kind as it will be stored: an old name's workers are not the ones that must run it.
  const kind = appendedKind(target.kind, request.kind);
  await assertSomeWorkerRuns(trx, target, kind, request.version ?? versionFor(commandKindSpec(target.kind, kind)!, request.payload ?? {}));
  await ADMISSION_CHECKS[`${target.kind}:${kind}`]?.(trx, target, (request.payload ?? {}) as Record<string, unknown>);
}

/**
 * Refuses a command that live workers exist for but none of them runs,
 * naming the versions they do run: queued, it would wait for a worker that
 * may never come. With no live worker at all everything waits anyway (a
 * fleet being restarted, or none started yet), so nothing is refused then.
 */
async function assertSomeWorkerRuns(trx: Db, target: ObjectRef, kind: string, version: number): Promise<void> {
  const workers = await liveHandlers(trx);
  const runs = workers.map((handles) => handles[target.kind]?.[kind] ?? []);
  if (workers.length === 0 || runs.some((versions) => versions.includes(version))) return;
  const running = [...new Set(runs.flat())].sort((a, b) => a - b);
  throw new UnsupportedVersionError(
    `no live worker runs ${target.kind} ${kind} version ${version}; the ${workers.length} live worker(s) run ` +
      (running.length > 0
        ? `version ${running.join(', ')}: send one of those, or upgrade the workers first`
        : `no version of it: upgrade the workers first`),
    { kind, version, liveVersions: running, liveWorkers: workers.length },
  );
}
