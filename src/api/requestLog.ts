import type { FastifyRequest } from 'fastify';

/**
 * A secret put in a URL (refused: the API reads tokens only from the
 * Authorization header) must not be written to the log with the URL:
 * every value of a query parameter named like a secret, and anything shaped
 * like a Slipway token (`slw_...`) anywhere in it, is replaced.
 */
const SECRET_PARAMETER = /([?&][^=&#]*(?:token|secret|password|passwd|auth|api[_-]?key)[^=&#]*=)[^&#]*/gi;
const SLIPWAY_TOKEN = /slw_[\w%-]+/gi;
const REDACTED = '[redacted]';

export function urlForLog(url: string): string {
  return url.replace(SECRET_PARAMETER, `$1${REDACTED}`).replace(SLIPWAY_TOKEN, `slw_${REDACTED}`);
}

/** fastify's request log serializer (its "incoming request" lines), with the URL as urlForLog gives it. */
export function requestForLog(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: urlForLog(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
