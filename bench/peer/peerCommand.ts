import type pg from 'pg';
import type { z } from 'zod';

/** A job of the peer, its payload parsed: the object it acts on (its queue's name) and the work. */
export interface PreparedCommand {
  readonly object: string;
  run(client: pg.PoolClient): Promise<void>;
}

/** One command kind of the peer: what its job does with the payload `append` gave it. */
export interface PeerCommand {
  prepare(payload: unknown): PreparedCommand;
}

/**
 * A command kind on objects of kind `object`, its payload checked by
 * `schema`; the payload's `id` names the object, as `append` sets it.
 */
export function command<S extends z.ZodType<{ id: number }>>(
  object: 'lease' | 'resource',
  schema: S,
  run: (client: pg.PoolClient, payload: z.infer<S>) => Promise<void>,
): PeerCommand {
  return {
    prepare(payload) {
      const parsed = schema.parse(payload);
      return { object: `${object}:${parsed.id}`, run: (client) => run(client, parsed) };
    },
  };
}

/** Runs `work` in a transaction on `client`, committed unless it says 'rollback' or throws. */
export async function transaction(client: pg.PoolClient, work: () => Promise<'commit' | 'rollback'>): Promise<void> {
  await client.query('begin');
  let ending: 'commit' | 'rollback' = 'rollback';
  try {
    ending = await work();
  } finally {
    await client.query(ending);
  }
}
