import os from 'node:os';
import { z } from 'zod';
import type { CommandSource, ObjectKind } from '../../migrations/schema.ts';

/** Who asked for a command, from where, and why. Recorded on every command. */
export interface Actor {
  readonly issuedBy: string;
  readonly source: CommandSource;
  readonly reason?: string | null;
  readonly requestId?: string | null;
  /** Where an HTTP request came from (API and web only). */
  readonly clientAddress?: string | null;
  readonly userAgent?: string | null;
}

export const ActorSchema = z.object({
  issuedBy: z.string().min(1).max(200),
  source: z.enum(['web', 'cli', 'api', 'gc', 'system']),
  reason: z.string().max(1000).nullish(),
  requestId: z.string().max(200).nullish(),
  clientAddress: z.string().max(100).nullish(),
  userAgent: z.string().max(500).nullish(),
});

/** The CLI's actor: the operating-system user at this host. */
export function cliActor(reason?: string): Actor {
  return { issuedBy: `${os.userInfo().username}@${os.hostname()}`, source: 'cli', reason: reason ?? null };
}

/**
 * The parts of Slipway that issue commands on their own, each recorded as
 * `system:<part>`: the collector (`gc`), the wait deadline and the time limit
 * (`deadline`), a preemption's grace period (`preemption`), the health checks (`health`), and an object's drain (`lease`, `resource`,
 * `blueprint`) for the messages it sends and the resources it makes. See
 * docs/decisions/0001-follow-ups-are-slipways.md.
 */
export type SystemPart = 'gc' | 'deadline' | 'preemption' | 'health' | ObjectKind;

/** The actor name of a part of Slipway: `system:health`. */
export function systemActorName<P extends SystemPart>(part: P): `system:${P}` {
  return `system:${part}`;
}
