/**
 * The hosts callbacks may be sent to. An entry is a host name or an IP
 * address, matched exactly, or `*.example.com` for any name under
 * example.com (not example.com itself). Entries and URLs are compared in the
 * WHATWG URL parser's canonical form, so `127.1`, `0x7f.0.0.1` and
 * `127.0.0.1` are one host, as are `[::1]` and `0:0:0:0:0:0:0:1`.
 */
export type AllowedHosts = readonly string[];

/** Loopback only: out of the box, a callback can reach nothing but this machine. */
export const DEFAULT_ALLOWED_HOSTS = 'localhost,127.0.0.1,::1';

const WILDCARD = '*.';

/** The canonical form of a host name or address, or undefined if it is not one. */
export function canonicalHost(host: string): string | undefined {
  const bracketed = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  try {
    const url = new URL(`http://${bracketed}/`);
    // Anything beyond a bare host (a port, a path, credentials) is not a host.
    return url.host === url.hostname && url.username === '' && url.pathname === '/' ? url.hostname : undefined;
  } catch {
    return undefined;
  }
}

/** Parses a comma- or space-separated list; throws naming the first entry that is not a host. */
export function parseAllowedHosts(text: string): AllowedHosts {
  const entries = text.split(/[\s,]+/).filter(Boolean);
  return entries.map((entry) => {
    const wildcard = entry.startsWith(WILDCARD);
    const host = canonicalHost(wildcard ? entry.slice(WILDCARD.length) : entry);
    if (!host || (wildcard && host.startsWith('['))) {
      throw new Error(`"${entry}" is not a host name, an IP address or *.domain`);
    }
    return wildcard ? `${WILDCARD}${host}` : host;
  });
}

/** Whether a URL's hostname (as `new URL().hostname` gives it) is on the list. */
export function isHostAllowed(hostname: string, allowed: AllowedHosts): boolean {
  return allowed.some((entry) => (entry.startsWith(WILDCARD) ? hostname.endsWith(entry.slice(1)) : hostname === entry));
}

/** The list as people wrote it, for messages ("localhost, 127.0.0.1, ::1"). */
export function describeAllowedHosts(allowed: AllowedHosts): string {
  return allowed.map((entry) => entry.replace(/^\[(.*)\]$/, '$1')).join(', ');
}
