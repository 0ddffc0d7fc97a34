import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { findUnstorable } from '../domain/storableValue.ts';
import { RequestValidationError } from './errors.ts';

/**
 * Route schemas are zod schemas: fastify hands each request part to the
 * route's schema, keeps the parsed value (coerced numbers, defaults) and
 * turns a failure into a RequestValidationError naming the field. The same
 * schemas make the OpenAPI document (openapi.ts). Before any schema, every
 * part is checked for what PostgreSQL cannot store and JSON nested too deep
 * (findUnstorable), so no route's schema has to remember it.
 */
export function installZodValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const zodSchema = schema as z.ZodType;
    const part = httpPart ?? 'body';
    return (data: unknown) => {
      const unstorable = findUnstorable(data);
      if (unstorable) {
        return { error: new RequestValidationError(part, [{ code: 'custom', path: [...unstorable.path], message: unstorable.message, input: undefined }]) };
      }
      // A POST without a body reaches us as null: read it as {} so the
      // schema can say which field is missing.
      const parsed = zodSchema.safeParse(part === 'body' && data === null ? {} : data);
      return parsed.success ? { value: parsed.data } : { error: new RequestValidationError(part, parsed.error.issues) };
    };
  });
}
