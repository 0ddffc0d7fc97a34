import type { Db } from '../db/Database.ts';
import { validateDriverSettings } from '../drivers/registry.ts';
import { findBlueprint } from '../read/blueprints.ts';
import type { ObjectRef } from './objectTables.ts';

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

/** Runs the admission check of a command kind, if it has one; throws InvalidInputError (or NotFoundError) to refuse it. */
export async function admit(trx: Db, target: ObjectRef, kind: string, payload: Record<string, unknown>): Promise<void> {
  await ADMISSION_CHECKS[`${target.kind}:${kind}`]?.(trx, target, payload);
}
