import { z } from "zod";
import { Count, Currency, Money } from "../../http/formats.ts";
import {
  GROUP_KEYS,
  type GroupKey,
  type RoyaltyFilter,
  royaltyGroups,
  royaltyLines,
  royaltyLinesAfter,
  royaltyTotals,
} from "../../royalties/queries.ts";
import { ApiError, notFound } from "../errors.ts";
import { type Context, Id, OffsetPagination as Pagination, route } from "../route.ts";

/**
 * Royalties (seed 001; docs/royalties.md): the lines of the store reports the operator imported,
 * matched to this account's catalog, across the catalog or for one release — as lines, or summed
 * in groups (by period, store, territory, release, track) — with totals per currency. Amounts are
 * decimal strings, never floats. Read with the royalties:read scope, under row-level security.
 */

const Month = z
  .string()
  .regex(/^\d{4}-(0[1-9]|1[0-2])$/)
  .meta({ description: "A month, YYYY-MM." });
const Amount = Money.meta({
  description: "A decimal amount as a string (never a float), in the row's currency.",
});

const filterFields = {
  from: Month.optional().meta({
    description: "Only sales and usage from this month on (YYYY-MM, inclusive).",
  }),
  to: Month.optional().meta({ description: "Only sales and usage up to this month (YYYY-MM, inclusive)." }),
  store: z
    .string()
    .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/)
    .optional()
    .meta({ description: "Only this store (a store code from GET /rules)." }),
  territory: z
    .string()
    .regex(/^[A-Z]{2}$/)
    .optional()
    .meta({ description: "Only this territory (ISO 3166-1 alpha-2)." }),
  currency: Currency.optional().meta({ description: "Only lines in this currency." }),
  group_by: z
    .string()
    .max(100)
    .regex(/^[a-z]+(,[a-z]+)*$/)
    .refine((v) => v.split(",").every((k) => (GROUP_KEYS as readonly string[]).includes(k)), {
      message: `a comma-separated list of ${GROUP_KEYS.join(", ")}`,
    })
    .optional()
    .meta({
      description:
        "Sum the lines in groups instead of listing them: any of period, store, territory, release, track, comma-separated. " +
        "Groups are always per currency. track: per track (with its release), and per release for the sales of a " +
        "release as a whole (track_id null).",
    }),
};

const startingAfter = {
  starting_after: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, { message: "a royalty line's id" })
    .optional()
    .meta({
      description:
        "A line's id: the page of lines after it (the last line of the page before), read by keyset however deep. " +
        "Not with offset or group_by.",
    }),
};

/** A period that ends before it starts is a mistake to point out, not an empty answer. */
const periodInOrder = (
  q: { from?: string; to?: string; starting_after?: string; offset?: number; group_by?: string },
  ctx: z.RefinementCtx,
) => {
  if (q.from && q.to && q.to < q.from) {
    ctx.addIssue({ code: "custom", path: ["to"], message: `to (${q.to}) is earlier than from (${q.from})` });
  }
  if (q.starting_after !== undefined && q.offset) {
    ctx.addIssue({
      code: "custom",
      path: ["starting_after"],
      message: "starting_after and offset do not go together",
    });
  }
  if (q.starting_after !== undefined && q.group_by) {
    ctx.addIssue({
      code: "custom",
      path: ["starting_after"],
      message: "starting_after pages lines, not groups",
    });
  }
};
const ListQuery = Pagination.extend({
  ...filterFields,
  ...startingAfter,
  release_id: Id.optional().meta({ description: "Only this release." }),
})
  .strict()
  .superRefine(periodInOrder);
const ReleaseQuery = Pagination.extend({ ...filterFields, ...startingAfter })
  .strict()
  .superRefine(periodInOrder);

const Sums = {
  lines: Count.meta({ description: "How many report lines." }),
  units: Count.meta({ description: "Units of every usage type (streams, downloads, views...)." }),
  streams: Count,
  downloads: Count,
  ugc_uses: Count.meta({ description: "Uses in user-generated content (video platforms)." }),
  gross: Amount.meta({ description: "Revenue before store fees." }),
  fees: Amount.meta({ description: "Fees the store kept." }),
  net: Amount.meta({ description: "Revenue after store fees." }),
};

const CurrencyTotal = z
  .object({ currency: Currency, ...Sums })
  .meta({ id: "RoyaltyCurrencyTotal", description: "Totals in one currency over every matching line." });

const RoyaltyLine = z
  .object({
    id: z.string().meta({ description: "The line's id." }),
    object: z.literal("royalty_line"),
    import_id: Id.meta({ description: "The import the line came with." }),
    release_id: Id,
    track_id: Id.nullable().meta({ description: "null when the line is about the release as a whole." }),
    isrc: z.string().nullable(),
    upc: z.string().nullable(),
    reporting_period: Month.meta({ description: "When the store reported it (YYYY-MM)." }),
    period_start: z.iso.date().meta({ description: "First day of the month of sale or use." }),
    period_end: z.iso.date().meta({ description: "Last day of the month of sale or use." }),
    store: z.string(),
    territory: z
      .string()
      .nullable()
      .meta({ description: "ISO 3166-1 alpha-2; null when the store did not say." }),
    usage_type: z.enum(["stream", "download", "ugc", "radio", "other"]),
    units: Count,
    gross: Amount,
    fees: Amount,
    net: Amount,
    currency: Currency,
  })
  .meta({ id: "RoyaltyLine" });

const RoyaltyGroup = z
  .object({
    object: z.literal("royalty_group"),
    period: Month.optional().meta({ description: "With group_by=period: the month of sale or use." }),
    store: z.string().optional().meta({ description: "With group_by=store." }),
    territory: z
      .string()
      .nullable()
      .optional()
      .meta({ description: "With group_by=territory (null: unknown)." }),
    release_id: Id.optional().meta({ description: "With group_by=release or group_by=track." }),
    release_title: z.string().nullable().optional().meta({
      description: "With group_by=track: the release's title (null if the release is not visible).",
    }),
    track_id: Id.nullable().optional().meta({
      description: "With group_by=track: the track; null for sales of the release as a whole (UPC only).",
    }),
    track_title: z
      .string()
      .nullable()
      .optional()
      .meta({ description: "With group_by=track: the track's title (null with no track)." }),
    isrc: z
      .string()
      .nullable()
      .optional()
      .meta({ description: "With group_by=track: the track's ISRC (null with no track)." }),
    currency: Currency,
    ...Sums,
  })
  .meta({ id: "RoyaltyGroup" });

const RoyaltyList = z
  .object({
    object: z.literal("list"),
    data: z.array(z.union([RoyaltyLine, RoyaltyGroup])).meta({
      description: "Lines, newest month first; or, with group_by, groups in key order.",
    }),
    total: z.number().int().optional().meta({
      description: "How many lines (or groups) match, over all pages; not on starting_after pages.",
    }),
    limit: z.number().int(),
    offset: z.number().int(),
    has_more: z.boolean(),
    totals: z
      .array(CurrencyTotal)
      .optional()
      .meta({ description: "Per currency, over everything that matches; not on starting_after pages." }),
  })
  .meta({ id: "RoyaltyList" });

type ListQueryT = z.infer<typeof ListQuery>;

async function answer(
  ctx: Context<unknown, ListQueryT, unknown>,
  releaseId: string | undefined,
): Promise<{ body: unknown }> {
  const q = ctx.query;
  const filter: RoyaltyFilter = {
    accountId: ctx.caller.accountId,
    from: q.from,
    to: q.to,
    store: q.store,
    territory: q.territory,
    currency: q.currency,
    releaseId: releaseId ?? q.release_id,
  };
  const groupBy = q.group_by ? (q.group_by.split(",") as GroupKey[]) : undefined;
  const body = await ctx.read(async (tx) => {
    if (releaseId) {
      const r = await tx.query("select 1 from public.releases where id = $1", [releaseId]);
      if (r.rowCount === 0) throw notFound("release", releaseId);
    }
    if (q.starting_after !== undefined && !groupBy) {
      // A keyset page: no totals (they sum every matching line), as cursor pages go (docs/public-api.md).
      const page = await royaltyLinesAfter(tx, filter, q.limit, q.starting_after);
      if (!page) {
        throw new ApiError(
          400,
          "resource_missing",
          `No royalty line ${q.starting_after} of yours to start after.`,
          {
            param: "starting_after",
          },
        );
      }
      return { object: "list" as const, data: page.rows, limit: q.limit, offset: 0, has_more: page.hasMore };
    }
    const totals = await royaltyTotals(tx, filter);
    let data: Record<string, unknown>[];
    let total: number;
    if (groupBy) {
      ({ rows: data, total } = await royaltyGroups(tx, filter, groupBy, q.limit, q.offset));
    } else {
      total = totals.reduce((n, t) => n + t.lines, 0);
      data = await royaltyLines(tx, filter, q.limit, q.offset, total);
    }
    return {
      object: "list" as const,
      data,
      total,
      limit: q.limit,
      offset: q.offset,
      has_more: q.offset + data.length < total,
      totals,
    };
  });
  return { body };
}

export const royaltyRoutes = [
  route({
    method: "GET",
    path: "/royalties",
    operationId: "listRoyalties",
    summary: "List royalty lines across the catalog",
    description:
      "The royalty lines of the account's releases from the store reports the operator imported, newest month " +
      "first; filtered by period (from, to), store, territory, release and currency; or summed with group_by. " +
      "totals sums every matching line per currency.",
    tag: "Royalties",
    scope: "royalties:read",
    query: ListQuery,
    response: {
      status: 200,
      description: "A page of royalty lines or groups, with totals.",
      schema: RoyaltyList,
    },
    errors: [400],
    handler: (ctx) => answer(ctx, undefined),
  }),
  route({
    method: "GET",
    path: "/releases/{id}/royalties",
    operationId: "listReleaseRoyalties",
    summary: "List the royalties of one release",
    description: "As GET /royalties, for one release (404 when the account has no such release).",
    tag: "Royalties",
    scope: "royalties:read",
    params: z.object({ id: Id }).strict(),
    query: ReleaseQuery,
    response: {
      status: 200,
      description: "A page of royalty lines or groups, with totals.",
      schema: RoyaltyList,
    },
    errors: [400, 404],
    handler: (ctx) =>
      answer(ctx as unknown as Context<unknown, ListQueryT, unknown>, (ctx.params as { id: string }).id),
  }),
];
