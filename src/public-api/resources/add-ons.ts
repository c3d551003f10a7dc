import { z } from "zod";
import {
  ADD_ON_BILLING,
  ADD_ON_COLUMNS,
  ADD_ON_EFFECTS,
  type AddOnRow,
  addOnObject,
  orderById,
  orderObject,
  ordersOf,
} from "../../add-ons/add-ons.ts";
import { asDbError } from "../../db/errors.ts";
import { Currency, Money, Timestamp } from "../../http/formats.ts";
import { ApiError, notFound, validationFailed } from "../errors.ts";
import { Id, route } from "../route.ts";

/**
 * Add-ons, a member's side (docs/public-api.md, "Add-ons"): the extras the tenant sells for a
 * release (YouTube Content ID, extra stores, priority review, ...), buying one for a release of
 * the account, and a release's add-ons. The database decides (migration 0051): members and keys
 * see their own tenant's add-ons on sale only, and a release's orders where they see the release;
 * buying needs the right to change the release (owner, admin or member — never a viewer) and is
 * charged to the account as a recoupable expense (docs/payouts.md).
 */

const TAG = "Add-ons";

const Code = z
  .string()
  .regex(/^[a-z0-9_-]{1,60}$/, "an add-on's code: lower-case letters, digits, _ and -")
  .meta({ description: "The add-on's code (GET /add-ons).", example: "youtube_content_id" });

const Price = Money.meta({
  description:
    "A decimal string (never a float) with as many decimals as the currency has minor units (2 for most, 0 for JPY, 3 for KWD).",
  example: "4.99",
});

const AddOn = z
  .object({
    code: Code,
    object: z.literal("add_on"),
    name: z.string(),
    description: z.string(),
    price: Price,
    currency: Currency,
    billing: z.enum(ADD_ON_BILLING).meta({
      description:
        "per_release: once for the release; per_year: for a year from purchase, then bought again.",
    }),
    effect: z.enum(ADD_ON_EFFECTS).meta({
      description:
        "unlock_store: the release is delivered to store_codes only with it; priority_review: the release is " +
        "reviewed first; informational: the tenant's staff fulfil it.",
    }),
    store_codes: z.array(z.string()).meta({ description: "The stores an unlock_store add-on unlocks." }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "AddOn" });

const AddOnOrder = z
  .object({
    id: Id,
    object: z.literal("add_on_order"),
    account_id: Id,
    release_id: Id,
    add_on: Code,
    name: z.string().meta({ description: "The add-on's name when it was bought." }),
    effect: z.enum(ADD_ON_EFFECTS),
    store_codes: z.array(z.string()),
    billing: z.enum(ADD_ON_BILLING),
    currency: Currency,
    price: Price.meta({ description: "What it was bought at (charged to the account)." }),
    active: z
      .boolean()
      .meta({ description: "Whether it is in effect: false once a per_year order has expired." }),
    created_at: Timestamp,
    expires_at: Timestamp.nullable().meta({
      description: "per_year: when it runs out; null for per_release.",
    }),
  })
  .meta({ id: "AddOnOrder" });

const withId = z.object({ id: Id });

const publicAddOn = (r: AddOnRow) => {
  const { enabled: _enabled, ...rest } = addOnObject(r);
  return rest;
};

export const addOnRoutes = [
  route({
    method: "GET",
    path: "/add-ons",
    operationId: "listAddOns",
    summary: "The add-ons on sale",
    description: "What the tenant sells for a release, in its order. Another tenant's are never listed.",
    tag: TAG,
    scope: "catalog:read",
    response: {
      status: 200,
      description: "Every add-on on sale (one page).",
      schema: z
        .object({ object: z.literal("list"), data: z.array(AddOn), has_more: z.literal(false) })
        .meta({ id: "AddOnList" }),
    },
    handler: async ({ read }) => {
      const rows = await read(
        async (tx) =>
          (
            await tx.query<AddOnRow>(
              `select ${ADD_ON_COLUMNS} from internal.add_on_settings s where s.enabled
               order by s.sort, s.name, s.add_on limit 200`,
            )
          ).rows,
      );
      return { body: { object: "list", data: rows.map(publicAddOn), has_more: false } };
    },
  }),

  route({
    method: "GET",
    path: "/releases/{id}/add-ons",
    operationId: "listReleaseAddOns",
    summary: "A release's add-ons",
    description: "Every order for the release, oldest first, expired per_year ones included (active false).",
    tag: TAG,
    scope: "catalog:read",
    params: withId,
    response: {
      status: 200,
      description: "The orders.",
      schema: z
        .object({ object: z.literal("list"), data: z.array(AddOnOrder), has_more: z.literal(false) })
        .meta({ id: "AddOnOrderList" }),
    },
    errors: [404],
    handler: async ({ params, read }) => {
      const rows = await read(async (tx) => {
        const seen = await tx.query("select 1 from public.releases where id = $1", [params.id]);
        if (seen.rowCount === 0) throw notFound("release", params.id);
        return ordersOf(tx, params.id);
      });
      return { body: { object: "list", data: rows.map(orderObject), has_more: false } };
    },
  }),

  route({
    method: "POST",
    path: "/releases/{id}/add-ons",
    operationId: "buyReleaseAddOn",
    summary: "Buy an add-on for a release",
    description:
      "Charges the add-on's price to the account (a recoupable expense: recouped from the account's earnings " +
      "before its payees are paid, shown on its statements) and puts it in effect at once. Idempotent: while the " +
      "release has the add-on (a per_release one ever, a per_year one until it expires) the answer is that same " +
      "order and nothing is charged again (compare its created_at). A viewer (or a key without catalog:write) cannot buy (403).",
    tag: TAG,
    scope: "catalog:write",
    params: withId,
    body: z.strictObject({ add_on: Code }).meta({ id: "AddOnPurchase" }),
    response: {
      status: 200,
      description: "The order: the new one, or the one in effect that the release already had.",
      schema: AddOnOrder,
    },
    errors: [404, 422],
    handler: async ({ params, body, write }) => {
      const made = await write(async (tx) => {
        const r = await tx
          .query<{ order_id: string; created: boolean }>("select * from internal.buy_add_on($1, $2)", [
            params.id,
            body.add_on,
          ])
          .catch((error: unknown) => {
            const db = asDbError(error);
            if (db?.detail === "not_found") throw notFound("release", params.id);
            if (db?.detail === "add_on_not_found") {
              throw validationFailed([
                { param: "add_on", code: "not_found", message: `no add-on ${body.add_on} is on sale` },
              ]);
            }
            if (db?.detail === "forbidden") {
              throw new ApiError(
                403,
                "forbidden",
                "Buying an add-on needs the right to change the release: an owner, admin or member of the account.",
              );
            }
            throw error;
          });
        const row = r.rows[0];
        if (!row) throw new Error("buy_add_on returned no row");
        const order = await orderById(tx, row.order_id);
        if (!order) throw new Error("the order just bought is not readable");
        return { order };
      });
      return { body: orderObject(made.order) };
    },
  }),
];
