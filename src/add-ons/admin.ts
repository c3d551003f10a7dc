import { z } from "zod";
import { FieldsError } from "../admin/errors.ts";
import { type AnyAdminRoute, adminRoute } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { Currency, MONEY_PATTERN, Money, Timestamp } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { minorUnits } from "../money/decimal.ts";
import {
  ADD_ON_BILLING,
  ADD_ON_COLUMNS,
  ADD_ON_EFFECTS,
  type AddOnRow,
  addOnObject,
  ORDER_COLUMNS,
  type OrderRow,
  orderObject,
} from "./add-ons.ts";

/**
 * Add-ons under /admin/v1 (docs/operator.md, "Add-ons"): the tenant's catalogue of paid extras.
 *
 *   GET   /add-ons                 every add-on of the tenant, on sale or not (reviewer and up)
 *   POST  /add-ons                 a new add-on (admin)
 *   GET   /add-ons/{code}          one add-on
 *   PATCH /add-ons/{code}          change it; enabled: false takes it off sale (admin)
 *   GET   /add-ons/{code}/orders   who bought it, newest first: staff fulfil informational ones
 *
 * An add-on is never deleted: orders keep naming it (take it off sale instead). A change applies
 * to purchases after it; an order keeps the price and stores it was bought with. A body that does
 * not parse is 400 invalid_request (the admin API's rule); one that parses but cannot be sold
 * (a price with more decimals than its currency has, a store that does not exist, stores on an
 * add-on that does not unlock stores) is 422 invalid_add_on, each failing field listed.
 */

const TAG = "Add-ons";

const Code = z
  .string()
  .regex(/^[a-z0-9_-]{1,60}$/, "lower-case letters, digits, _ and -, up to 60")
  .meta({ description: "The add-on's code, unique in the tenant.", example: "youtube_content_id" });

// The Money schema's pattern (what the document shows, docs/public-api.md "Formats"), and then
// what a price may be: not negative, up to 9 whole digits and 3 decimals.
const PRICE_MESSAGE = "an amount as a decimal string (0 or more), e.g. 4.99";
const Price = z
  .string()
  .regex(MONEY_PATTERN, PRICE_MESSAGE)
  .refine((v) => /^\d{1,9}(\.\d{1,3})?$/.test(v), PRICE_MESSAGE)
  .meta({
    description:
      "The price, a decimal string (0 for a free add-on), with at most the currency's decimals (2 for most, 0 for JPY, 3 for KWD).",
    example: "4.99",
  });

const StoreCodes = z
  .array(z.string().regex(/^[a-z0-9]+(_[a-z0-9]+)*$/, "a store code"))
  .max(50)
  .meta({ description: "unlock_store: the stores it unlocks (codes of GET /stores); empty otherwise." });

const Fields = {
  name: z.string().trim().min(1).max(100).meta({ description: "What members see (1–100 characters)." }),
  description: z.string().max(2000).meta({ description: "What it gives, up to 2,000 characters." }),
  price: Price,
  currency: Currency.meta({ description: "ISO 4217; default the tenant's statement currency." }),
  billing: z.enum(ADD_ON_BILLING).meta({
    description:
      "per_release: bought once for a release; per_year: for a year from purchase, then bought again.",
  }),
  effect: z.enum(ADD_ON_EFFECTS).meta({
    description:
      "unlock_store: its stores are delivered to only for releases that have it; priority_review: the release " +
      "comes first in the review queue; informational: staff fulfil it (Content ID, lyrics, ...).",
  }),
  store_codes: StoreCodes,
  enabled: z.boolean().meta({ description: "On sale to members (default true)." }),
  sort: z
    .number()
    .int()
    .min(-1000)
    .max(1000)
    .meta({ description: "Order in lists, lowest first (default 0)." }),
};

const NewAddOn = z
  .strictObject({
    code: Code,
    name: Fields.name,
    description: Fields.description.optional(),
    price: Fields.price,
    currency: Fields.currency.optional(),
    billing: Fields.billing,
    effect: Fields.effect,
    store_codes: Fields.store_codes.optional(),
    enabled: Fields.enabled.optional(),
    sort: Fields.sort.optional(),
  })
  .meta({ id: "NewAddOn" });

const AddOnChange = z
  .strictObject({
    name: Fields.name.optional(),
    description: Fields.description.optional(),
    price: Fields.price.optional(),
    currency: Fields.currency.optional(),
    billing: Fields.billing.optional(),
    effect: Fields.effect.optional(),
    store_codes: Fields.store_codes.optional(),
    enabled: Fields.enabled.optional(),
    sort: Fields.sort.optional(),
  })
  .meta({ id: "AddOnChange" });

export const AdminAddOn = z
  .object({
    code: Code,
    object: z.literal("add_on"),
    name: z.string(),
    description: z.string(),
    price: Money.meta({
      description:
        "A decimal string with as many decimals as the currency has minor units (2 for most, 0 for JPY).",
    }),
    currency: Currency,
    billing: z.enum(ADD_ON_BILLING),
    effect: z.enum(ADD_ON_EFFECTS),
    store_codes: z.array(z.string()),
    enabled: z.boolean(),
    orders: z.number().int().meta({ description: "How many orders it has had." }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "AdminAddOn" });

const AdminAddOnOrder = z
  .object({
    id: z.uuid(),
    object: z.literal("add_on_order"),
    account_id: z.uuid(),
    account_name: z.string(),
    release_id: z.uuid(),
    release_title: z.string().nullable(),
    add_on: z.string(),
    name: z.string(),
    effect: z.enum(ADD_ON_EFFECTS),
    store_codes: z.array(z.string()),
    billing: z.enum(ADD_ON_BILLING),
    currency: Currency,
    price: Money.meta({ description: "What it was bought at, a decimal string in the currency beside it." }),
    active: z.boolean().meta({ description: "false once a per_year order has expired." }),
    created_at: Timestamp,
    expires_at: Timestamp.nullable(),
  })
  .meta({ id: "AdminAddOnOrder" });

const CodeParams = z.object({ code: Code });

type Row = AddOnRow & { orders: string };

const adminObject = (r: Row) => ({ ...addOnObject(r), orders: Number(r.orders) });

async function addOnOf(tx: Tx, tenantId: string, code: string): Promise<Row | undefined> {
  return (
    await tx.query<Row>(
      `select ${ADD_ON_COLUMNS}, (select count(*) from internal.add_on_orders o
         where o.tenant_id = s.tenant_id and o.add_on = s.add_on) as orders
       from internal.add_on_settings s where s.tenant_id = $1 and s.add_on = $2`,
      [tenantId, code],
    )
  ).rows[0];
}

const missing = (code: string) => new HttpError(404, "not_found", `no add-on ${code}`, "code");

/** The checks a parsed add-on must pass to be sold: 422 invalid_add_on listing each failing field. */
async function checkSellable(
  tx: Tx,
  a: { price: string; currency: string; effect: string; store_codes: string[] },
  given: { store_codes: boolean },
): Promise<void> {
  const errors: { param: string; code: string; message: string }[] = [];
  const places = minorUnits(a.currency);
  const decimals = a.price.split(".")[1]?.length ?? 0;
  if (decimals > places) {
    errors.push({
      param: "price",
      code: "amount_precision",
      message: `${a.currency} has ${places} decimal${places === 1 ? "" : "s"}: ${a.price} has ${decimals}`,
    });
  }
  if (a.effect === "unlock_store" && a.store_codes.length === 0) {
    errors.push({
      param: "store_codes",
      code: "required",
      message: "an unlock_store add-on names the stores it unlocks",
    });
  } else if (a.effect !== "unlock_store" && a.store_codes.length > 0) {
    errors.push({
      param: "store_codes",
      code: "invalid_value",
      message: `only an unlock_store add-on names stores (this one is ${a.effect})`,
    });
  } else if (a.store_codes.length > 0) {
    const known = new Set(
      (
        await tx.query<{ code: string }>("select code from internal.stores where code = any ($1::text[])", [
          a.store_codes,
        ])
      ).rows.map((r) => r.code),
    );
    const unknown = a.store_codes.filter((c) => !known.has(c));
    if (unknown.length > 0) {
      errors.push({
        param: given.store_codes ? "store_codes" : "effect",
        code: "unknown_store",
        message: `no store ${unknown.join(", ")} (GET /stores lists them)`,
      });
    }
  }
  if (errors.length > 0) {
    throw new FieldsError(
      422,
      "invalid_add_on",
      errors.length === 1 ? (errors[0]?.message ?? "invalid add-on") : `${errors.length} fields are invalid.`,
      errors,
    );
  }
}

export function addOnSpecs(options: { db: Db }): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/add-ons",
      operationId: "listAddOns",
      summary: "The tenant's add-ons, on sale or not",
      tag: TAG,
      staffRole: "reviewer",
      response: {
        status: 200,
        description: "Every add-on, in their sort order.",
        schema: z.object({ data: z.array(AdminAddOn) }).meta({ id: "AdminAddOnList" }),
      },
      handler: ({ tenantId }) =>
        db.asService(
          async (tx) => ({
            data: (
              await tx.query<Row>(
                `select ${ADD_ON_COLUMNS}, (select count(*) from internal.add_on_orders o
                   where o.tenant_id = s.tenant_id and o.add_on = s.add_on) as orders
                 from internal.add_on_settings s where s.tenant_id = $1 order by s.sort, s.name, s.add_on`,
                [tenantId],
              )
            ).rows.map(adminObject),
          }),
          { readOnly: true },
        ),
    }),
    adminRoute({
      method: "POST",
      path: "/add-ons",
      operationId: "createAddOn",
      summary: "Offer a new add-on",
      description:
        "On sale at once unless enabled is false. 409 add_on_exists when the code is taken; 422 invalid_add_on " +
        "when it cannot be sold as given (price precision, stores).",
      tag: TAG,
      staffRole: "admin",
      body: NewAddOn,
      response: { status: 201, description: "The add-on.", schema: AdminAddOn },
      errors: [409, 422],
      handler: ({ tenantId, body }) =>
        db.asService(async (tx) => {
          const currency =
            body.currency ??
            (await tx.query<{ c: string }>("select internal.tenant_currency($1)::text as c", [tenantId]))
              .rows[0]?.c ??
            "USD";
          const storeCodes = [...new Set(body.store_codes ?? [])];
          await checkSellable(
            tx,
            { price: body.price, currency, effect: body.effect, store_codes: storeCodes },
            { store_codes: body.store_codes !== undefined },
          );
          const made = await tx.query(
            `insert into internal.add_on_settings (tenant_id, add_on, name, description, price, currency, billing,
               effect, store_codes, enabled, sort)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) on conflict do nothing`,
            [
              tenantId,
              body.code,
              body.name,
              body.description ?? "",
              body.price,
              currency,
              body.billing,
              body.effect,
              storeCodes,
              body.enabled ?? true,
              body.sort ?? 0,
            ],
          );
          if (made.rowCount === 0) {
            throw new HttpError(
              409,
              "add_on_exists",
              `the tenant has an add-on ${body.code} already`,
              "code",
            );
          }
          return adminObject((await addOnOf(tx, tenantId, body.code)) as Row);
        }),
    }),
    adminRoute({
      method: "GET",
      path: "/add-ons/{code}",
      operationId: "getAddOn",
      summary: "One add-on",
      tag: TAG,
      staffRole: "reviewer",
      params: CodeParams,
      response: { status: 200, description: "The add-on.", schema: AdminAddOn },
      errors: [404],
      handler: ({ tenantId, params }) =>
        db.asService(
          async (tx) => {
            const row = await addOnOf(tx, tenantId, params.code);
            if (!row) throw missing(params.code);
            return adminObject(row);
          },
          { readOnly: true },
        ),
    }),
    adminRoute({
      method: "PATCH",
      path: "/add-ons/{code}",
      operationId: "updateAddOn",
      summary: "Change an add-on, or take it off sale",
      description:
        "Applies to purchases after it: orders keep what they were bought with. enabled: false takes it off " +
        "sale; releases that have it keep it (an unlock_store add-on's stores stay locked for the others).",
      tag: TAG,
      staffRole: "admin",
      params: CodeParams,
      body: AddOnChange,
      response: { status: 200, description: "The add-on.", schema: AdminAddOn },
      errors: [404, 422],
      handler: ({ tenantId, params, body }) =>
        db.asService(async (tx) => {
          const row = await addOnOf(tx, tenantId, params.code);
          if (!row) throw missing(params.code);
          const next = {
            price: body.price ?? row.price,
            currency: body.currency ?? row.currency,
            effect: body.effect ?? row.effect,
            store_codes:
              body.store_codes !== undefined
                ? [...new Set(body.store_codes)]
                : body.effect !== undefined && body.effect !== "unlock_store"
                  ? []
                  : row.store_codes,
          };
          // The stored price is checked as given (trailing zeros of numeric text are not decimals).
          const price = body.price ?? row.price.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
          await checkSellable(tx, { ...next, price }, { store_codes: body.store_codes !== undefined });
          await tx.query(
            `update internal.add_on_settings set name = coalesce($3, name), description = coalesce($4, description),
               price = $5, currency = $6, billing = coalesce($7, billing), effect = $8, store_codes = $9,
               enabled = coalesce($10, enabled), sort = coalesce($11, sort)
             where tenant_id = $1 and add_on = $2`,
            [
              tenantId,
              params.code,
              body.name ?? null,
              body.description ?? null,
              price,
              next.currency,
              body.billing ?? null,
              next.effect,
              next.store_codes,
              body.enabled ?? null,
              body.sort ?? null,
            ],
          );
          return adminObject((await addOnOf(tx, tenantId, params.code)) as Row);
        }),
    }),
    adminRoute({
      method: "GET",
      path: "/add-ons/{code}/orders",
      operationId: "listAddOnOrders",
      summary: "Who bought an add-on",
      description: "Newest first, up to 500: the list staff fulfil an informational add-on from.",
      tag: TAG,
      staffRole: "reviewer",
      params: CodeParams,
      response: {
        status: 200,
        description: "The orders.",
        schema: z.object({ data: z.array(AdminAddOnOrder) }).meta({ id: "AdminAddOnOrderList" }),
      },
      errors: [404],
      handler: ({ tenantId, params }) =>
        db.asService(
          async (tx) => {
            if (!(await addOnOf(tx, tenantId, params.code))) throw missing(params.code);
            const rows = (
              await tx.query<OrderRow & { account_name: string; release_title: string | null }>(
                `select ${ORDER_COLUMNS}, a.name as account_name, r.title as release_title
                 from internal.add_on_orders o join internal.accounts a on a.id = o.account_id
                 left join public.releases r on r.id = o.release_id
                 where o.tenant_id = $1 and o.add_on = $2 order by o.created_at desc, o.id desc limit 500`,
                [tenantId, params.code],
              )
            ).rows;
            return {
              data: rows.map((r) => ({
                ...orderObject(r),
                account_name: r.account_name,
                release_title: r.release_title,
              })),
            };
          },
          { readOnly: true },
        ),
    }),
  ];
}
