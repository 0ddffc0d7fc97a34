import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { RequestValidationError } from './errors.ts';

/**
 * Route schemas are zod schemas: fastify hands each request part to the
 * route's schema, keeps the parsed value (coerced numbers, defaults) and
 * turns a failure into a RequestValidationError naming the field. The same
 * schemas make the OpenAPI document (openapi.ts).
 */
export function installZodValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const zodSchema = schema as z.ZodType;
    const part = httpPart ?? 'body';
    return (data: unknown) => {
      // A POST without a body reaches us as null: read it as {} so the
      // schema can say which field is missing.
      const parsed = zodSchema.safeParse(part === 'body' && data === null ? {} : data);
      return parsed.success ? { value: parsed.data } : { error: new RequestValidationError(part, parsed.error.issues) };
    };
  });
}
