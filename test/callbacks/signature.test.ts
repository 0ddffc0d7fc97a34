import { expect, test } from 'vitest';
import { signCallback, verifyCallbackSignature } from '../../src/callbacks/signCallback.ts';

const secret = 'a-secret-of-at-least-thirty-two-chars';
const body = '{"event":"command.settled","delivery":1}';
const at = new Date('2026-01-01T00:00:00Z');

test('a signature is t=<unix seconds>,v1=<hmac-sha256 hex> and verifies against the same body and secret', () => {
  const header = signCallback(body, secret, at);
  expect(header).toMatch(/^t=1767225600,v1=[0-9a-f]{64}$/);
  expect(verifyCallbackSignature({ header, body, secret, now: at })).toEqual({ ok: true, signedAt: at });
});

test.each([
  ['another secret', { secret: 'another-secret-of-thirty-two-chars!!' }, /does not match/],
  ['a changed body', { body: body.replace('1', '2') }, /does not match/],
  ['a changed time', { header: signCallback(body, secret, at).replace('t=1767225600', 't=1767225601') }, /does not match/],
  ['an old signature', { now: new Date(at.getTime() + 301_000) }, /signed 5m1s ago; more than 5m apart/],
  ['no header', { header: undefined }, /malformed Slipway-Signature header/],
  ['a header without v1', { header: 't=1767225600' }, /malformed/],
  ['a short v1', { header: 't=1767225600,v1=abc' }, /malformed/],
])('refused: %s', (_what, change, reason) => {
  const request = { header: signCallback(body, secret, at), body, secret, now: at, ...change };
  const result = verifyCallbackSignature(request);
  expect(result.ok).toBe(false);
  expect(!result.ok && result.reason).toMatch(reason);
});

test('the tolerance is the receiver’s to choose', () => {
  const header = signCallback(body, secret, at);
  const later = new Date(at.getTime() + 600_000);
  expect(verifyCallbackSignature({ header, body, secret, now: later }).ok).toBe(false);
  expect(verifyCallbackSignature({ header, body, secret, now: later, toleranceSeconds: 900 }).ok).toBe(true);
});
