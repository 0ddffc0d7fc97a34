import type { ObjectKind } from '../../migrations/schema.ts';
import { COMMAND_KINDS, type CommandKindOf, type PayloadInputOf } from '../domain/commandKinds.ts';

/**
 * Messages between objects: the commands a handler sends to other objects
 * (or its own), which its step's commit appends (commitOutcome.ts). Each is
 * typed by its receiver's command-kind table (domain/commandKinds.ts), so a
 * kind its receiver does not have, or a payload its latest schema does not
 * take, does not compile. The commit still validates each one, as every
 * append is.
 */

/** A command of kind `C` for the `K` with `target.id`, as a handler sends it. */
export type MessageTo<K extends ObjectKind, C extends CommandKindOf<K>> = {
  readonly target: { readonly kind: K; readonly id: number };
  readonly kind: C;
  readonly reason: string;
  /** Queued, but not applied before this many milliseconds from the commit. */
  readonly notBeforeMs?: number;
} & (CarriesNothing<K, C> extends true ? { readonly payload?: undefined } : { readonly payload: PayloadInputOf<K, C> });

/** A command for another object (or this one) that this command leads to: any object kind's message of any of its kinds. */
export type FollowUp = { [K in ObjectKind]: { [C in CommandKindOf<K>]: MessageTo<K, C> }[CommandKindOf<K>] }[ObjectKind];

/** Whether a kind's latest payload has no fields (`{}`): its sender gives none. */
type CarriesNothing<K extends ObjectKind, C extends CommandKindOf<K>> = [PayloadInputOf<K, C>] extends [Record<string, never>] ? true : false;

export interface SendOptions {
  readonly notBeforeMs?: number;
}

/** Builds a message of kind `C` to the `K` with id `id`: with its payload unless the kind carries none. */
type Sender<K extends ObjectKind, C extends CommandKindOf<K>> =
  CarriesNothing<K, C> extends true
    ? (id: number, reason: string, options?: SendOptions) => MessageTo<K, C>
    : (id: number, payload: PayloadInputOf<K, C>, reason: string, options?: SendOptions) => MessageTo<K, C>;

export type Send = { readonly [K in ObjectKind]: { readonly [C in CommandKindOf<K>]: Sender<K, C> } };

/**
 * A builder per object kind and command kind, made from the command-kind
 * table: `send.lease.grant(leaseId, { resourceId, slot }, reason)`,
 * `send.lease.destroy(leaseId, reason)`.
 */
export const send = Object.fromEntries(
  Object.entries(COMMAND_KINDS).map(([target, kinds]) => [
    target,
    Object.fromEntries(Object.keys(kinds).map((kind) => [kind, sender(target as ObjectKind, kind)])),
  ]),
) as unknown as Send;

function sender(target: ObjectKind, kind: string) {
  // Every payload is an object, so a string in its place is the reason of a kind that carries none.
  return (id: number, ...rest: unknown[]) => {
    const [payload, reason, options] = (typeof rest[0] === 'string' ? [undefined, ...rest] : rest) as [unknown, string, SendOptions?];
    return {
      target: { kind: target, id },
      kind,
      ...(payload === undefined ? {} : { payload }),
      reason,
      ...(options?.notBeforeMs === undefined ? {} : { notBeforeMs: options.notBeforeMs }),
    };
  };
}
