import type { Client } from "openapi-fetch";
import { unwrap } from "./errors.ts";
import type { paths } from "./generated/openapi.ts";

/**
 * Walking a list by cursor (docs/public-api.md, "Lists"): the first page without a cursor, then
 * `starting_after=<the last item's id>` while `has_more`. A cursor names an item, not a position,
 * so a list that changes during the walk still yields each item that stays exactly once.
 */

type GetOf<P extends keyof paths> = paths[P] extends { get: infer O } ? O : never;
type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
type PageOf<O> = O extends { responses: { 200: { content: { "application/json": infer B } } } } ? B : never;

/** The GET paths that page by cursor: a `starting_after` parameter and `{data: [...], has_more}` pages. */
export type CursorPath = {
  [P in keyof paths]: "starting_after" extends keyof QueryOf<GetOf<P>>
    ? PageOf<GetOf<P>> extends { data: unknown[]; has_more: boolean }
      ? P
      : never
    : never;
}[keyof paths];

/** An item of a cursor list. */
export type ItemOf<P extends CursorPath> = PageOf<GetOf<P>> extends { data: (infer I)[] } ? I : never;

type CursorParams<P extends CursorPath> =
  GetOf<P> extends { parameters: infer X }
    ? Omit<X, "query"> & { query?: Omit<QueryOf<GetOf<P>>, "starting_after" | "ending_before" | "offset"> }
    : never;

/** What to walk: the path's parameters (the cursor is the helper's), and the page size as `query.limit`. */
export interface PaginateInit<P extends CursorPath> {
  params?: CursorParams<P>;
  /** Stop after this many items (all by default). */
  max?: number;
  signal?: AbortSignal;
}

// biome-ignore lint/suspicious/noExplicitAny: any client generated from these paths, whatever its media type
type AnyClient = Client<paths, any>;

/** Every page of a cursor list, in order, as the API answers them (each with `data` and `has_more`). */
export async function* pages<P extends CursorPath>(
  client: AnyClient,
  path: P,
  init: PaginateInit<P> = {},
): AsyncGenerator<PageOf<GetOf<P>>, void, undefined> {
  const params = (init.params ?? {}) as { query?: Record<string, unknown> };
  let cursor: string | undefined;
  for (;;) {
    const query = { ...params.query, ...(cursor === undefined ? {} : { starting_after: cursor }) };
    // The path is one of the typed list paths; openapi-fetch cannot follow a generic path's types.
    const page = (await unwrap(
      client.GET(path as never, { params: { ...params, query }, signal: init.signal } as never),
    )) as { data: { id: string }[]; has_more: boolean };
    yield page as PageOf<GetOf<P>>;
    const last = page.data.at(-1);
    if (!page.has_more || last === undefined) return;
    cursor = last.id;
  }
}

/**
 * Every item of a cursor list, fetching pages as the loop asks for them:
 * `for await (const release of paginate(api, "/releases", { params: { query: { limit: 100 } } }))`.
 * An error answer throws `BacklineApiError`.
 */
export async function* paginate<P extends CursorPath>(
  client: AnyClient,
  path: P,
  init: PaginateInit<P> = {},
): AsyncGenerator<ItemOf<P>, void, undefined> {
  let n = 0;
  if (init.max !== undefined && init.max <= 0) return;
  for await (const page of pages(client, path, init)) {
    for (const item of (page as { data: ItemOf<P>[] }).data) {
      yield item;
      if (init.max !== undefined && ++n >= init.max) return;
    }
  }
}
