import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Action } from './auth/roles.ts';

type Part = z.ZodType | undefined;
type Parsed<S extends Part> = S extends z.ZodType ? z.output<S> : undefined;

/** One route: its zod schemas (validation and OpenAPI), what it does (authorization), and its handler. */
export interface RouteSpec<P extends Part, Q extends Part, B extends Part> {
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly url: string;
  readonly summary: string;
  /** What the caller's role must allow; a route without one is public. */
  readonly action?: Action;
  /** The same, for a web UI route: checked against the browser's session instead of a bearer token (src/web/webAuth.ts). */
  readonly webAction?: Action;
  readonly params?: P;
  readonly query?: Q;
  readonly body?: B;
  readonly handler: (
    input: { params: Parsed<P>; query: Parsed<Q>; body: Parsed<B> },
    request: FastifyRequest,
    reply: FastifyReply,
  ) => Promise<unknown>;
}

/** Adds a route whose handler gets the parsed, typed request parts. */
export function addRoute<P extends Part = undefined, Q extends Part = undefined, B extends Part = undefined>(
  app: FastifyInstance,
  spec: RouteSpec<P, Q, B>,
): void {
  app.route({
    method: spec.method,
    url: spec.url,
    config: { action: spec.action, webAction: spec.webAction, summary: spec.summary },
    schema: {
      ...(spec.params ? { params: spec.params } : {}),
      ...(spec.query ? { querystring: spec.query } : {}),
      ...(spec.body ? { body: spec.body } : {}),
    },
    handler: (request, reply) =>
      spec.handler(
        { params: request.params as Parsed<P>, query: request.query as Parsed<Q>, body: request.body as Parsed<B> },
        request,
        reply,
      ),
  });
}
