import type { Db } from './Database.ts';

/**
 * State a handler keeps for the rest of the step it is decided in, such as
 * an answer every later decision of the step would read again, or what the
 * decisions before it promised. Keyed by the `Db` a decision that queries
 * in its transaction is given (a `querying` handler's, or one whose
 * `readsInTransaction` says so, see Handler.ts): the drain makes one per
 * step's transaction, shared by the step's heads and runs and never reused,
 * so the state never outlives the step (a pure decision gets no `Db`, and
 * one of a handler that declares no queries a refusing `Db` that outlives
 * steps: neither has anything to keep here).
 */
export function perStep<T>(fresh: () => T): (trx: Db) => T {
  const byStep = new WeakMap<Db, T>();
  return (trx) => {
    let state = byStep.get(trx);
    if (state === undefined) {
      state = fresh();
      byStep.set(trx, state);
    }
    return state;
  };
}
