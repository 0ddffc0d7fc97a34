import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TokenRole } from '../../../migrations/schema.ts';
import type { Db } from '../../db/Database.ts';
import type { Actor } from '../../domain/Actor.ts';
import { ApiError } from '../errors.ts';
import { FailureLimiter } from './FailureLimiter.ts';
import { reachOf, type Action, type Reach } from './roles.ts';
import { findLiveToken, markUsed, tokenActorName, type LiveToken } from './tokens.ts';

/** Who is calling: the token, its role, and how far the route's action reaches for it. */
export interface Caller {
  readonly tokenId: number;
  readonly name: string;
  readonly role: TokenRole;
  /** `token:<name>`: the actor recorded on its commands, and the holder of its leases. */
  readonly actorName: string;
  readonly reach: Reach;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route does, for authorization; a route without one is public. */
    action?: Action;
    /** One line for the OpenAPI document. */
    summary?: string;
  }
  interface FastifyRequest {
    caller?: Caller;
  }
}

/** How often a token's last_used_at is written, at most. */
const MARK_USED_EVERY_MS = 60_000;

/**
 * How long a token found valid is trusted without asking the database
 * again: a revoked token stops working within this long on every server.
 * Spares a round trip on nearly every request.
 */
const TOKEN_TRUST_MS = 5000;

/**
 * Authenticates every non-public route (bearer token), refuses what the
 * token's role may not do, and rate-limits failed authentication per client
 * address. Runs before the body is even parsed, so a refused request reads
 * nothing and writes nothing.
 */
export function installAuthentication(app: FastifyInstance, db: Db, failuresPerMinute: number): void {
  const limiter = new FailureLimiter(failuresPerMinute);
  const lastMarked = new Map<number, number>();
  const trusted = new Map<string, { token: LiveToken; until: number }>();
  const lookUp = async (secret: string): Promise<LiveToken | undefined> => {
    const now = Date.now();
    const known = trusted.get(secret);
    if (known && known.until > now) return known.token;
    trusted.delete(secret);
    const token = await findLiveToken(db, secret);
    if (token) trusted.set(secret, { token, until: now + TOKEN_TRUST_MS });
    return token;
  };
  const pruning = setInterval(() => {
    limiter.prune();
    const now = Date.now();
    for (const [secret, { until }] of trusted) if (until <= now) trusted.delete(secret);
  }, 60_000);
  pruning.unref();
  app.addHook('onClose', async () => clearInterval(pruning));

  app.addHook('onRequest', async (request) => {
    const action = request.routeOptions.config.action;
    if (action === undefined) return;
    const wait = limiter.retryAfter(request.ip);
    if (wait > 0) {
      throw new ApiError('too_many_requests', `too many failed authentications from ${request.ip}; try again in ${wait} s`, {}, wait);
    }
    const secret = bearerToken(request);
    const token = secret === undefined ? undefined : await lookUp(secret);
    if (!token) {
      limiter.recordFailure(request.ip);
      throw new ApiError(
        'unauthorized',
        secret === undefined
          ? 'this request needs a token: send "Authorization: Bearer <token>" (tokens come from `slipway token create`)'
          : 'the token is unknown or revoked',
      );
    }
    const reach = reachOf(token.role, action);
    if (!reach) {
      throw new ApiError('forbidden', `a ${token.role} token may not ${describeAction(action)}`, { role: token.role, action });
    }
    request.caller = { tokenId: token.id, name: token.name, role: token.role, actorName: tokenActorName(token.name), reach };
    const now = Date.now();
    if ((lastMarked.get(token.id) ?? 0) < now - MARK_USED_EVERY_MS) {
      lastMarked.set(token.id, now);
      await markUsed(db, token.id);
    }
  });
}

function bearerToken(request: FastifyRequest): string | undefined {
  const match = /^Bearer ([\x21-\x7e]{1,200})$/i.exec(request.headers.authorization ?? '');
  return match?.[1];
}

const ACTION_TEXT: Record<Action, string> = {
  read: 'read',
  'lease.create': 'create leases',
  'lease.command': 'send commands to leases',
  'resource.command': 'send commands to resources',
  'command.cancel': 'cancel commands',
  'blueprint.write': 'create or change blueprints',
};

function describeAction(action: Action): string {
  return ACTION_TEXT[action];
}

/** The caller of an authenticated route (set by the hook above). */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Error(`route ${request.routeOptions.url} has no action, so no caller`);
  return request.caller;
}

/** The actor recorded on what this request asks for: who, from where, with which request. */
export function actorOf(request: FastifyRequest, reason?: string | null): Actor {
  return {
    issuedBy: callerOf(request).actorName,
    source: 'api',
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
