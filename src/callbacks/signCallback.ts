import { createHmac, timingSafeEqual } from 'node:crypto';
import { formatDuration } from '../domain/durations.ts';

/** The header carrying a callback's signature. */
export const SIGNATURE_HEADER = 'Slipway-Signature';

/**
 * The signature of one delivery: `t=<unix seconds>,v1=<hex>`, where the hex is
 * HMAC-SHA256, keyed with the shared secret, of `<t>.<body>` (the exact bytes
 * of the request body). Signing the time with the body lets a receiver refuse
 * an old request replayed at it; each attempt is signed afresh.
 */
export function signCallback(body: string, secret: string, at: Date = new Date()): string {
  const t = Math.floor(at.getTime() / 1000);
  return `t=${t},v1=${hmac(secret, t, body)}`;
}

export type Verification = { readonly ok: true; readonly signedAt: Date } | { readonly ok: false; readonly reason: string };

export interface VerifyRequest {
  /** The Slipway-Signature header as received. */
  readonly header: string | undefined;
  /** The raw request body, before any JSON parsing. */
  readonly body: string;
  readonly secret: string;
  /** How old a signature may be; older ones are refused as possible replays. Default 5 minutes. */
  readonly toleranceSeconds?: number;
  readonly now?: Date;
}

/**
 * What a receiver runs on each callback: the signature must match the body
 * and the secret, and be recent. (Refusing replays is the receiver's job:
 * this refuses old signatures; remembering the Slipway-Delivery ids it has
 * seen within the tolerance closes the window entirely.)
 */
export function verifyCallbackSignature(request: VerifyRequest): Verification {
  const { header, body, secret, toleranceSeconds = 300, now = new Date() } = request;
  const fields = new Map(
    (header ?? '').split(',').map((part) => {
      const at = part.indexOf('=');
      return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
    }),
  );
  const t = Number(fields.get('t'));
  const given = fields.get('v1');
  if (!Number.isSafeInteger(t) || !given || !/^[0-9a-f]{64}$/.test(given)) {
    return { ok: false, reason: `malformed ${SIGNATURE_HEADER} header; expected t=<unix seconds>,v1=<64 hex digits>` };
  }
  const expected = Buffer.from(hmac(secret, t, body), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(given, 'hex'))) {
    return { ok: false, reason: 'signature does not match the body and secret' };
  }
  const ageSeconds = now.getTime() / 1000 - t;
  if (Math.abs(ageSeconds) > toleranceSeconds) {
    return {
      ok: false,
      reason: `signed ${formatDuration(Math.round(ageSeconds) * 1000)} ago; more than ${formatDuration(toleranceSeconds * 1000)} apart from now`,
    };
  }
  return { ok: true, signedAt: new Date(t * 1000) };
}

function hmac(secret: string, t: number, body: string): string {
  return createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
}
