import type { FastifyInstance, RouteOptions } from 'fastify';
import { z } from 'zod';
import { ErrorBodySchema } from './errors.ts';
import { MAX_WAIT_S } from './schemas.ts';

/** The answers every authenticated route may give besides its own. */
const COMMON_ERRORS: Record<string, string> = {
  '400': 'invalid request: `details.field` names the field',
  '401': 'no valid token',
  '403': "the token's role may not do this",
  '404': 'no such object',
  '429': 'too many failed authentications from this address (see Retry-After)',
};

const POST_ERRORS: Record<string, string> = {
  '409': "impossible in the object's state or queue, or the same Idempotency-Key still in progress",
  '413': 'body too large',
  '415': 'body is not application/json',
  '422': 'Idempotency-Key reused for a different request',
  '429': "the object's queue is full, or too many failed authentications (see Retry-After)",
  '503': 'the backlog is full, or a lock conflict rolled the request back (see Retry-After)',
};

/**
 * The OpenAPI 3.1 document, made from the routes themselves: each route's
 * zod schemas (params, query, body) become its parameters and request body,
 * so the document cannot drift from what the server validates.
 */
export function installOpenApi(app: FastifyInstance): void {
  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/v1/') && route.method !== 'HEAD') routes.push(route);
  });
  let document: unknown;
  app.get('/v1/openapi.json', { config: { summary: 'this document' } }, async () => {
    document ??= buildDocument(routes);
    return document;
  });
}

function buildDocument(routes: readonly RouteOptions[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (route.url === '/v1/openapi.json') continue;
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    const method = String(route.method).toLowerCase();
    const schema = (route.schema ?? {}) as { params?: z.ZodType; querystring?: z.ZodType; body?: z.ZodType };
    const isPost = method === 'post';
    paths[path] ??= {};
    paths[path][method] = {
      summary: route.config?.summary,
      ...(route.config?.action ? { security: [{ bearer: [] }], 'x-slipway-action': route.config.action } : {}),
      parameters: [
        ...parametersOf(schema.params, 'path'),
        ...parametersOf(schema.querystring, 'query'),
        ...(isPost ? [idempotencyKeyParameter] : []),
      ],
      ...(schema.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(schema.body) } } } } : {}),
      responses: {
        '2XX': { description: 'success; see the summary for 200/201/202' },
        ...errorResponses(route.config?.action ? { ...COMMON_ERRORS, ...(isPost ? POST_ERRORS : {}) } : {}),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Slipway',
      version: '1',
      description: `Leases on pooled resources. Every change is a command on an object's queue. ?wait is at most ${MAX_WAIT_S} s.`,
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token from `slipway token create`' } },
      schemas: { Error: jsonSchema(ErrorBodySchema) },
    },
    paths,
  };
}

const idempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'repeat a POST safely: the same key with the same request returns the first answer (kept at least 24 h)',
  schema: { type: 'string', maxLength: 200 },
};

function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query') {
  if (!schema) return [];
  const json = jsonSchema(schema) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (json.required ?? []).includes(name),
    schema: property,
  }));
}

/** What a caller sends (the input side of transforms), as JSON Schema. */
function jsonSchema(schema: z.ZodType): unknown {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' });
}

function errorResponses(codes: Record<string, string>) {
  return Object.fromEntries(
    Object.entries(codes).map(([code, description]) => [
      code,
      { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    ]),
  );
}
