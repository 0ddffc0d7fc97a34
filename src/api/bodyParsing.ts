import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.ts';

/**
 * The bodies the API reads: JSON only (the web UI adds its forms,
 * src/web/forms.ts), so any other media type, text/plain included, is a
 * 415. JSON is read here in place of fastify's reader so that each refusal
 * says what is really wrong: an empty body, text that is not JSON, or JSON
 * with a key that could change what objects inherit (`__proto__`, or
 * `constructor` holding `prototype`), which nothing in Slipway needs.
 * fastify's body size limit applies as before.
 */
export function installBodyParsing(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw new ApiError('invalid_json', 'the body is empty; send a JSON object ({} when nothing else is needed)');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ApiError('invalid_json', `the body is not valid JSON: ${(error as Error).message}`);
  }
  const key = prototypeKeyIn(value);
  if (key) throw new ApiError('forbidden_key', `the key "${key}" is not accepted: it could change what objects inherit; rename it`, { key });
  return value;
}

/** The first `__proto__` or `constructor.prototype` key anywhere in `value` (walked without recursion: it may be nested deep). */
function prototypeKeyIn(value: unknown): string | undefined {
  const pending = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next !== 'object' || next === null) continue;
    for (const [key, child] of Object.entries(next)) {
      if (key === '__proto__') return key;
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return 'constructor.prototype';
      pending.push(child);
    }
  }
  return undefined;
}
