import { createHash } from "node:crypto";

/**
 * A statement whose text is fixed: a constant of the code, never built per call. On PostgreSQL
 * each pooled connection parses, rewrites (row-level security's policies) and plans it once, as a
 * named prepared statement, and from then on only binds and executes it: a release's detail as a
 * public-API key went from 4.1 to 0.9 ms of database time (bench/README.md). PGlite runs the text
 * as any other statement.
 *
 * Only for statements that name their columns: a prepared `select *` would fail with "cached plan
 * must not change result type" once a migration adds a column under a running process (the
 * engine then drops that connection; the request is answered 500 once per connection).
 */
export interface Prepared {
  readonly name: string;
  readonly text: string;
  /**
   * A statement generated per request (/rest/v1's, src/rest/execute.ts), not a constant: each
   * connection keeps only its most recently used ones prepared (a bounded cache, the least recently
   * used deallocated first), so that any number of shapes cannot fill the server's memory.
   */
  readonly generated?: boolean;
}

export function prepared(text: string): Prepared {
  const name = `bl_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
  return Object.freeze({ name, text });
}

/**
 * A statement built per request whose values are all bind parameters ($n), so that its text is its
 * shape: requests of the same shape share one prepared statement per connection, in a bounded
 * least-recently-used cache (src/db/postgres.ts). PGlite runs the text as any other statement.
 */
export function generated(text: string): Prepared {
  const name = `blg_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
  return { name, text, generated: true };
}

/** The SQL text of a statement given either way. */
export const textOf = (statement: string | Prepared): string =>
  typeof statement === "string" ? statement : statement.text;
