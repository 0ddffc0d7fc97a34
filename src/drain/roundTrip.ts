import type { CompiledQuery } from 'kysely';
import type pg from 'pg';

type Statement = string | CompiledQuery;

/**
 * One round trip of a lane: statements sent together as one simple query
 * (DrainLane's send), in the order they are added. Those whose results the
 * lane reads are added under a name (`read`) and their results read by it,
 * so no caller counts positions.
 */
export class RoundTrip<Name extends string> {
  readonly statements: Statement[] = [];
  private readonly named = new Map<Name, { readonly at: number; readonly count: number }>();

  /** Statements whose results are not read. */
  add(...statements: readonly Statement[]): this {
    this.statements.push(...statements);
    return this;
  }

  /** Statements whose results are read, in order, as `name` (once per name). */
  read(name: Name, statements: readonly Statement[]): this {
    if (this.named.has(name)) throw new Error(`a round trip reads "${name}" once`);
    this.named.set(name, { at: this.statements.length, count: statements.length });
    this.statements.push(...statements);
    return this;
  }

  /** What every statement answered, read by the names their statements were added under. */
  results(all: readonly pg.QueryResult[]): RoundTripResults<Name> {
    const named = this.named;
    const get = (name: Name) => {
      const place = named.get(name);
      return place ? all.slice(place.at, place.at + place.count) : [];
    };
    return {
      get,
      one(name) {
        const [result] = get(name);
        if (!result) throw new Error(`a round trip read nothing as "${name}"`);
        return result;
      },
    };
  }
}

export interface RoundTripResults<Name extends string> {
  /** The results of the statements read as `name`, in order (none if nothing was added under it). */
  get(name: Name): pg.QueryResult[];
  /** The result of the one statement read as `name`. */
  one(name: Name): pg.QueryResult;
}
