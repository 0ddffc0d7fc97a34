/**
 * The LISTEN/NOTIFY channels of Slipway, in one place: whoever sends on one
 * and whoever listens to it import its name from here.
 */

/** The channel on which workers hear that wake-ups are due (src/drain/DrainEngine.ts). */
export const WAKE_CHANNEL = 'slipway_wake';

/** The channel on which every settled or yielded command is announced (for waiters: src/read/CommandNotices.ts). */
export const COMMANDS_CHANNEL = 'slipway_commands';

/**
 * The channel on which a revoked token's id is announced, so every API
 * server forgets it at once (TrustedTokens) rather than trusting it until
 * its cache entry runs out.
 */
export const TOKEN_REVOKED_CHANNEL = 'slipway_token_revoked';
