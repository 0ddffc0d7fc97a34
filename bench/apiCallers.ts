import type { Db } from '../src/db/Database.ts';
import { createToken } from '../src/api/auth/tokens.ts';
import type { TokenRole } from '../migrations/schema.ts';
import { HttpJsonClient } from '../test/helpers/HttpJsonClient.ts';

/** A running Slipway API as a measurement calls it: callers, each with keep-alive connections of its own, so several behave like separate callers. */
export interface CallerMaker {
  caller(connections: number): HttpJsonClient;
}

/** Callers that share one token. */
export interface ApiCallers extends CallerMaker {
  /** Closes every caller made. */
  close(): void;
}

/**
 * Makes a token of `role` directly in the database (the benchmark is the
 * operator who holds it) and returns a maker of callers of the API at `url`.
 */
export async function apiCallers(db: Db, url: string, role: TokenRole): Promise<ApiCallers> {
  const name = `bench-${role}-${Date.now().toString(36)}`;
  const { secret } = await createToken(db, { name, role }, 'bench');
  const made: HttpJsonClient[] = [];
  return {
    caller(connections) {
      const caller = new HttpJsonClient(url, secret, { connections });
      made.push(caller);
      return caller;
    },
    close() {
      for (const caller of made) caller.close();
    },
  };
}
