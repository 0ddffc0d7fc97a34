import type { Db } from './Database.ts';

type Hook = (db: Db) => Promise<void>;
const pending = new WeakMap<Db, Map<string, Hook>>();

/**
 * Runs `hook` once the transaction `trx` (one of withTransaction's) has
 * committed, with the database it committed on; a second hook of the same
 * `name` in one transaction is dropped. For what must never travel inside a
 * durable commit: a NOTIFY (see src/queue/wakeSignal.ts). On a Db that is
 * not such a transaction it does nothing: that caller sends its own.
 */
export function afterCommit(trx: Db, name: string, hook: Hook): void {
  if (!trx.isTransaction) return;
  let hooks = pending.get(trx);
  if (!hooks) {
    hooks = new Map();
    pending.set(trx, hooks);
  }
  if (!hooks.has(name)) hooks.set(name, hook);
}

/** Runs the hooks `trx` gathered (withTransaction, after its commit). */
export async function runAfterCommit(trx: Db, db: Db): Promise<void> {
  const hooks = pending.get(trx);
  if (!hooks) return;
  pending.delete(trx);
  for (const hook of hooks.values()) await hook(db);
}
