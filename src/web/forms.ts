import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Reason } from '../api/schemas.ts';
import { CSRF_FIELD } from './csrf.ts';

/**
 * Browsers post forms as application/x-www-form-urlencoded: read into a
 * plain object (a repeated field keeps its last value), then validated by
 * each route's zod schema like any API body.
 */
export function installFormParsing(app: FastifyInstance, bodyLimit: number): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
}

/** A form field left empty (or only spaces) is absent: a browser sends `name=` for an empty input or "any" in a select. */
export function blank<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (typeof value === 'string' && value.trim() === '' ? undefined : value), schema);
}

/** Every form of a signed-in page: its CSRF token (checked before validation, see csrf.ts) and, for buttons, an optional reason. */
export const FormBase = {
  [CSRF_FIELD]: z.string(),
  reason: blank(Reason.optional()),
};
