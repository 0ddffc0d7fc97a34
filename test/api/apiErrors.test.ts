import type { FastifyRequest } from 'fastify';
import { expect, test } from 'vitest';
import { answerFor } from '../../src/api/errors.ts';

const request = {} as FastifyRequest;

/** What PostgreSQL's errors look like to the API: pg's DatabaseError carries the SQLSTATE as `code`. */
const databaseError = (code: string) => Object.assign(new Error('deadlock detected'), { code });

test('a deadlock or serialization failure is a 503 to retry (the transaction rolled back whole); other database errors stay 500', () => {
  for (const code of ['40P01', '40001']) {
    expect(answerFor(databaseError(code), request)).toMatchObject({ status: 503, body: { code: 'try_again' }, retryAfter: 1 });
  }
  expect(answerFor(databaseError('23505'), request)).toMatchObject({ status: 500, body: { code: 'internal' } });
});
