/**
 * How a holder that runs work under a lease (`withLease`, `slipway lease
 * run`) keeps it: a heartbeat lease of this interval unless the request
 * names one, so that a holder that dies gives the lease back within two
 * intervals, and one that lives rides out a restart of Slipway of up to as
 * long.
 */
export const DEFAULT_HEARTBEAT_MS = 30_000;
