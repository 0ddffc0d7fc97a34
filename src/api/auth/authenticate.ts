import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { CommandSource, TokenRole } from '../../../migrations/schema.ts';
import type { Actor } from '../../domain/Actor.ts';
import { ApiError } from '../errors.ts';
import { FailureLimiter } from './FailureLimiter.ts';
import { MAX_PRIORITY, reachOf, type Action, type Reach } from './roles.ts';
import { tokenActorName, type LiveToken } from './tokens.ts';
import type { TrustedTokens } from './TrustedTokens.ts';
import { formatDuration } from '../../domain/durations.ts';

/** Who is calling: the token, its role, and how far the route's action reaches for it. */
export interface Caller {
  readonly tokenId: number;
  readonly name: string;
  readonly role: TokenRole;
  /** `token:<name>`: the actor recorded on its commands, and the holder of its leases. */
  readonly actorName: string;
  /** Its token's team: the team of the leases it creates. */
  readonly team: string;
  readonly reach: Reach;
  /** Where its commands come from: `api` for a bearer token, `web` for a signed-in browser. */
  readonly source: CommandSource;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route does, for authorization; a route without one is public. */
    action?: Action;
  }
  interface FastifyRequest {
    caller?: Caller;
  }
}

/**
 * Authenticates every non-public route (bearer token), refuses what the
 * token's role may not do, and rate-limits failed authentication per client
 * address. Runs before the body is even parsed, so a refused request reads
 * nothing and writes nothing.
 */
export function installAuthentication(app: FastifyInstance, tokens: TrustedTokens, failuresPerMinute: number): void {
  const limiter = new FailureLimiter(failuresPerMinute);
  const pruning = setInterval(() => {
    limiter.prune();
    tokens.prune();
  }, 60_000);
  pruning.unref();
  app.addHook('onClose', async () => clearInterval(pruning));

  app.addHook('onRequest', async (request) => {
    const action = request.routeOptions.config.action;
    if (action === undefined) return;
    const wait = limiter.retryAfter(request.ip);
    if (wait > 0) {
      throw new ApiError(
        'too_many_requests',
        `too many failed authentications from ${request.ip}; try again in ${formatDuration(wait * 1000)}`,
        {},
        wait,
      );
    }
    const secret = bearerToken(request);
    const token = secret === undefined ? undefined : await tokens.find(secret);
    if (!token) {
      limiter.recordFailure(request.ip);
      throw new ApiError(
        'unauthorized',
        secret === undefined
          ? 'this request needs a token: send "Authorization: Bearer <token>" (tokens come from `slipway token create`)'
          : 'the token is unknown or revoked',
      );
    }
    request.caller = authorize(token, action, 'api');
    await tokens.markUsed(token);
  });
}

/** The caller a live token makes for an action, or a 403 when its role may not do it (the API's and the web UI's one check). */
export function authorize(token: LiveToken, action: Action, source: CommandSource): Caller {
  const reach = reachOf(token.role, action);
  if (!reach) {
    throw new ApiError('forbidden', `a ${token.role} token may not ${ACTION_TEXT[action]}`, { role: token.role, action });
  }
  return { tokenId: token.id, name: token.name, role: token.role, actorName: tokenActorName(token.name), team: token.team, reach, source };
}

function bearerToken(request: FastifyRequest): string | undefined {
  const match = /^Bearer ([\x21-\x7e]{1,200})$/i.exec(request.headers.authorization ?? '');
  return match?.[1];
}

/** Each action as the end of "a viewer token may not ...". */
const ACTION_TEXT: Record<Action, string> = {
  read: 'read',
  'lease.create': 'create leases',
  'lease.command': 'send commands to leases',
  'resource.command': 'send commands to resources',
  'command.cancel': 'cancel commands',
  'blueprint.write': 'create or change blueprints',
  'team.write': 'change teams, their weights or their quotas',
};

/** The caller of an authenticated route (set by the hook above). */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Error(`route ${request.routeOptions.url} has no action, so no caller`);
  return request.caller;
}

/** The actor recorded on what this request asks for: who, from where, with which request. */
export function actorOf(request: FastifyRequest, reason?: string | null): Actor {
  const caller = callerOf(request);
  return {
    issuedBy: caller.actorName,
    source: caller.source,
    reason: reason ?? null,
    requestId: request.id,
    clientAddress: request.ip,
    userAgent: request.headers['user-agent']?.slice(0, 500) ?? null,
  };
}

/** Refuses a caller whose grant reaches only its own objects, for an object it does not own. */
export function assertMayTouch(caller: Caller, owner: string, what: string): void {
  if (caller.reach === 'any' || owner === caller.actorName) return;
  throw new ApiError('forbidden', `a ${caller.role} token may only act on its own ${what}; this one belongs to ${owner}`, {
    role: caller.role,
    owner,
  });
}

/** Refuses a lease priority above what the caller's role may ask for (MAX_PRIORITY). */
export function assertPriorityAllowed(caller: Caller, priority: number | undefined): void {
  const most = MAX_PRIORITY[caller.role];
  if (priority === undefined || priority <= most) return;
  throw new ApiError('forbidden', `a ${caller.role} token may ask for priority 0 to ${most}, not ${priority}: ask an operator`, {
    role: caller.role,
    priority,
    maxPriority: most,
  });
}
