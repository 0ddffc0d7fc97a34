import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject, serializerCompiler } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { z } from 'zod';
import { findUnstorable } from '../domain/storableValue.ts';
import type { Answer, Operation } from './contract.ts';
import { ErrorBodySchema, RequestValidationError } from './errors.ts';
import { MAX_WAIT_S } from './schemas.ts';

/**
 * Routes are declared with fastify-type-provider-zod: each route's zod
 * schemas type its handler, validate its request parts, serialize its
 * answers, and make the OpenAPI document (@fastify/swagger), so none of
 * them can drift from the others. The operations themselves are data in
 * contract.ts; `routeOf` turns one into fastify's route options.
 */

/** The answers every authenticated operation may give besides its own. */
const READ_ERRORS = {
  400: 'invalid request: `details.field` names the field',
  401: 'no valid token',
  403: "the token's role may not do this",
  404: 'no such object',
  429: 'too many failed authentications from this address (see Retry-After)',
  500: 'a fault of the server: the log has the details (search for the request id)',
  503: 'the database is unavailable, or a lock conflict rolled the request back (see Retry-After)',
} as const;

/** …and those of a request that writes. */
const WRITE_ERRORS = {
  ...READ_ERRORS,
  409: "impossible in the object's state or queue, or the same Idempotency-Key still in progress",
  413: 'body too large',
  415: 'body is not application/json',
  422: 'Idempotency-Key reused for a different request',
  429: "the object's queue is full, or too many failed authentications (see Retry-After)",
  503: 'the backlog is full, the database is unavailable, or a lock conflict rolled the request back (see Retry-After)',
} as const;

type ErrorCodesOf<O extends Operation> = O['action'] extends string
  ? O['method'] extends 'GET'
    ? keyof typeof READ_ERRORS
    : keyof typeof WRITE_ERRORS
  : never;

function errorsOf(op: Operation): Record<string, string> {
  if (!op.action) return {};
  return op.method === 'GET' ? READ_ERRORS : WRITE_ERRORS;
}

type Part<O, K extends string> = O extends { [P in K]: infer S extends z.ZodType } ? S : undefined;

/** fastify's options for an operation's route (all but its handler), typed by its schemas. */
export function routeOf<O extends Operation>(op: O) {
  const successes = Object.fromEntries(Object.entries(op.responses).map(([code, { schema }]) => [code, schema]));
  const errors = Object.fromEntries(Object.keys(errorsOf(op)).map((code) => [code, ErrorBodySchema]));
  return {
    method: op.method,
    url: op.url,
    config: { action: op.action, operation: op },
    schema: {
      ...definedOnly({
        params: op.params as Part<O, 'params'>,
        querystring: op.query as Part<O, 'query'>,
        body: op.body as Part<O, 'body'>,
      }),
      response: { ...successes, ...errors } as { [C in keyof O['responses']]: O['responses'][C] extends Answer<infer S> ? S : never } & Record<
        ErrorCodesOf<O>,
        typeof ErrorBodySchema
      >,
    },
  };
}

/** The parts an operation has: fastify warns of a part given as undefined. Typed as given, for the type provider. */
function definedOnly<T extends Record<string, unknown>>(parts: T): T {
  return Object.fromEntries(Object.entries(parts).filter(([, schema]) => schema !== undefined)) as T;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation a route serves (contract.ts): the OpenAPI document's source for it. */
    operation?: Operation;
  }
}

/**
 * Validates each request part with its route's zod schema, keeping the
 * parsed value (coerced numbers, defaults). fastify-type-provider-zod's own
 * validator does the same, but this one first refuses what PostgreSQL cannot
 * store and JSON nested too deep (findUnstorable), so no schema has to
 * remember it, and keeps each issue's path as it is, so errors.ts can name
 * the field (`body.payload.slot`) the way the caller wrote it.
 */
function validatorCompiler({ schema, httpPart }: { schema: unknown; httpPart?: string }) {
  const zodSchema = schema as z.ZodType;
  const part = httpPart ?? 'body';
  return (data: unknown) => {
    const unstorable = findUnstorable(data);
    if (unstorable) {
      return {
        error: new RequestValidationError(part, [{ code: 'custom', path: [...unstorable.path], message: unstorable.message, input: undefined }]),
      };
    }
    // A POST without a body reaches us as null: read it as {} so the
    // schema can say which field is missing.
    const parsed = zodSchema.safeParse(part === 'body' && data === null ? {} : data);
    return parsed.success ? { value: parsed.data } : { error: new RequestValidationError(part, parsed.error.issues) };
  };
}

const idempotencyKeyHeader = {
  type: 'object',
  properties: {
    'Idempotency-Key': {
      type: 'string',
      maxLength: 200,
      description: 'repeat a POST safely: the same key with the same request returns the first answer (kept at least 24 h)',
    },
  },
};

/**
 * What @fastify/swagger makes of one route: fastify-type-provider-zod's JSON
 * Schemas, plus what the schemas cannot say: who may call it (bearer,
 * `x-slipway-action`), the Idempotency-Key header of a POST, and what each
 * status code means. Routes that are not operations (probes, metrics, the
 * web UI, this document) are left out.
 */
function transform(input: Parameters<typeof jsonSchemaTransform>[0]) {
  const op = (input.route.config as { operation?: Operation } | undefined)?.operation;
  if (!op) return { schema: { hide: true }, url: input.url };
  const { schema, url } = jsonSchemaTransform(input);
  const json = schema as Record<string, unknown> & { response: Record<string, unknown> };
  const meanings: Record<string, string> = {
    ...Object.fromEntries(Object.entries(op.responses).map(([code, answer]) => [code, answer.description])),
    ...errorsOf(op),
  };
  const response = Object.fromEntries(
    Object.entries(json.response).map(([code, body]) => [code, { description: meanings[code], content: { 'application/json': { schema: body } } }]),
  );
  return {
    url,
    schema: {
      ...json,
      operationId: op.operationId,
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      ...(op.method === 'POST' ? { headers: idempotencyKeyHeader } : {}),
      ...(op.action ? { security: [{ bearer: [] }], 'x-slipway-action': op.action } : {}),
      response,
    },
  };
}

/** The OpenAPI document's own description. */
const INFO = {
  title: 'Slipway',
  version: '1',
  description: `Leases on pooled resources. Every change is a command on an object's queue. ?wait is at most ${MAX_WAIT_S} s.`,
};

/**
 * Installs the zod validator and serializer, and the OpenAPI 3.1 document
 * at GET /v1/openapi.json (public), generated from the routes registered
 * after this.
 */
export async function installTypedRoutes(app: FastifyInstance): Promise<void> {
  app.setValidatorCompiler(validatorCompiler);
  // The answers are checked against their schemas as they are serialized:
  // an answer that strays from what the document promises is our fault (a 500), not the caller's surprise.
  app.setSerializerCompiler(serializerCompiler);
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: INFO,
      servers: [{ url: '/', description: 'this server' }],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token from `slipway token create`' } },
      },
    },
    transform,
    // Swagger makes a 3.1 document here (openapi: '3.1.0' above).
    transformObject: (input) => withoutUnusedSchemas(jsonSchemaTransformObject(input) as OpenApiDocument),
  });
  let document: unknown;
  app.get('/v1/openapi.json', async () => (document ??= app.swagger()));
}

type OpenApiDocument = Partial<OpenAPIV3_1.Document>;

/**
 * jsonSchemaTransformObject adds every registered schema twice (as read and
 * as written); the document keeps the ones it refers to.
 */
function withoutUnusedSchemas(document: OpenApiDocument): OpenApiDocument {
  const schemas = document.components?.schemas ?? {};
  const text = JSON.stringify({ ...document, components: { ...document.components, schemas: {} } });
  const used = new Set<string>();
  const pending = Object.keys(schemas).filter((name) => text.includes(`"#/components/schemas/${name}"`));
  while (pending.length > 0) {
    const name = pending.pop()!;
    if (used.has(name)) continue;
    used.add(name);
    const inner = JSON.stringify(schemas[name]);
    for (const other of Object.keys(schemas)) if (!used.has(other) && inner.includes(`"#/components/schemas/${other}"`)) pending.push(other);
  }
  return {
    ...document,
    components: { ...document.components, schemas: Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name))) },
  };
}
