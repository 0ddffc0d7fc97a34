import type { Command } from 'commander';
import { BlueprintRef as BlueprintRefArg } from '../api/schemas.ts';
import { SelectorTextSchema } from '../domain/labels.ts';
import { TeamNameSchema } from '../domain/team.ts';
import type { BlueprintRef } from '../read/blueprints.ts';
import { countBetween, Duration, parseWith, PositiveId, textUpTo } from './parsers.ts';
import type { LeaseRequest } from './transport/Transport.ts';

/** What lease to request: `lease create` and `lease run` take the same options. */
export interface LeaseRequestOptions {
  readonly blueprint?: BlueprintRef;
  readonly selector?: string;
  readonly holder?: string;
  /** Milliseconds. */
  readonly expiresIn?: number;
  /** Milliseconds. */
  readonly heartbeat?: number;
  /** Milliseconds. */
  readonly waitTimeout?: number;
  readonly priority?: number;
  readonly team?: string;
  /** false with --no-queue: refused at once when a quota is reached. */
  readonly queue: boolean;
  /** With --not-preemptible. */
  readonly notPreemptible?: boolean;
  readonly reservation?: number;
  readonly reason?: string;
}

export function addLeaseRequestOptions(command: Command, heartbeatDefault: string): Command {
  return command
    .option('--blueprint <name|id>', 'the blueprint to lease from (give it, a --selector, or both)', parseWith(BlueprintRefArg))
    .option(
      '--selector <selector>',
      'what the resource must be, by its labels, e.g. "gpu=a100, os in (linux, bsd), !spot"; without --blueprint, it chooses one',
      parseWith(SelectorTextSchema),
    )
    .option('--holder <name>', 'who holds the lease (default: you, as user@host; remote mode: the token)', parseWith(textUpTo(200)))
    .option('--expires-in <duration>', 'give it up after this long, e.g. 30m, 2h, 1h30m', parseWith(Duration))
    .option(
      '--heartbeat <duration>',
      `a heartbeat lease: released once two of these intervals pass without a \`lease renew\`, e.g. 30s (${heartbeatDefault})`,
      parseWith(Duration),
    )
    .option(
      '--priority <0-9>',
      "how urgent: served ahead of lower priorities that have waited less than this many of the blueprint's priority steps",
      parseWith(countBetween(0, 9)),
    )
    .option(
      '--wait-timeout <duration>',
      'give up if the lease is not active this long after the request: the collector releases it (as system:deadline), e.g. 10m',
      parseWith(Duration),
    )
    .option('--team <name>', "the team the lease counts for (default: default; remote mode: the token's team)", parseWith(TeamNameSchema))
    .option('--no-queue', 'refuse at once, rather than wait in line, if a quota of the team or holder is reached')
    .option(
      '--reservation <id>',
      "use this reservation: during its window the lease is served from its slots first, ahead of the line (refused if it may not use it; without --blueprint, the reservation's)",
      parseWith(PositiveId),
    )
    .option(
      '--not-preemptible',
      "not to be preempted by a blueprint that preempts (refused at once beyond the team's allowance, its preemption's protected setting)",
    );
}

/** The request the options describe. */
export function leaseRequestOf(options: LeaseRequestOptions): LeaseRequest {
  const { blueprint, selector, holder, expiresIn, heartbeat, waitTimeout, priority, team, queue, notPreemptible, reservation, reason } = options;
  return {
    blueprint,
    selector,
    holder,
    expiresInMs: expiresIn,
    heartbeatMs: heartbeat,
    waitTimeoutMs: waitTimeout,
    priority,
    team,
    ...(queue ? {} : { queue: false }),
    ...(notPreemptible ? { preemptible: false } : {}),
    ...(reservation === undefined ? {} : { reservation }),
    reason,
  };
}
