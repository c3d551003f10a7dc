import type { Tx } from "../db/types.ts";
import { timestamp } from "../http/formats.ts";
import { minorUnits } from "../money/decimal.ts";

/**
 * Add-ons (docs/operator.md, "Add-ons"; migration 0051): the paid extras a tenant sells for its
 * members' releases, and the orders for them. The catalogue is internal.add_on_settings (the
 * add_on column is the add-on's code); an order is internal.add_on_orders, with what was bought as
 * it was then. Buying is the database's (internal.buy_add_on): who may, idempotence, the charge.
 *
 * What an add-on does (its effect):
 *   unlock_store     its stores are delivered to only for releases that have it (lockedStores);
 *   priority_review  the release comes first in the review queue (src/admin/queries.ts);
 *   informational    nothing automatic: staff fulfil it (YouTube Content ID, lyrics delivery, ...).
 */

export const ADD_ON_EFFECTS = ["unlock_store", "priority_review", "informational"] as const;
export type AddOnEffect = (typeof ADD_ON_EFFECTS)[number];
export const ADD_ON_BILLING = ["per_release", "per_year"] as const;
export type AddOnBilling = (typeof ADD_ON_BILLING)[number];

export interface AddOnRow {
  add_on: string;
  name: string;
  description: string;
  price: string;
  currency: string;
  billing: AddOnBilling;
  effect: AddOnEffect;
  store_codes: string[];
  enabled: boolean;
  sort: number;
  created_at: Date | string;
  updated_at: Date | string;
}

export const ADD_ON_COLUMNS = `s.add_on, s.name, s.description, s.price::text as price, s.currency, s.billing, s.effect,
  s.store_codes, s.enabled, s.sort, s.created_at, s.updated_at`;

/** The price as stated: the currency's minor units (2 for most, 0 for JPY, 3 for KWD). */
export function statedPrice(price: string, currency: string): string {
  const places = minorUnits(currency);
  const [whole = "0", frac = ""] = price.split(".");
  return places === 0 ? whole : `${whole}.${frac.padEnd(places, "0").slice(0, places)}`;
}

/** An add-on as both APIs show it. */
export function addOnObject(r: AddOnRow) {
  return {
    code: r.add_on,
    object: "add_on" as const,
    name: r.name,
    description: r.description,
    price: statedPrice(r.price, r.currency),
    currency: r.currency,
    billing: r.billing,
    effect: r.effect,
    store_codes: r.store_codes,
    enabled: r.enabled,
    created_at: timestamp(r.created_at) as string,
    updated_at: timestamp(r.updated_at) as string,
  };
}

export interface OrderRow {
  id: string;
  account_id: string;
  release_id: string;
  add_on: string;
  name: string;
  effect: AddOnEffect;
  store_codes: string[];
  billing: AddOnBilling;
  currency: string;
  price: string;
  active: boolean;
  ordered_by: string | null;
  created_at: Date | string;
  expires_at: Date | string | null;
}

export const ORDER_COLUMNS = `o.id, o.account_id, o.release_id, o.add_on, o.name, o.effect, o.store_codes, o.billing,
  o.currency, o.price::text as price, (o.expires_at is null or o.expires_at > now()) as active, o.ordered_by,
  o.created_at, o.expires_at`;

/** An order as both APIs show it: the price it was bought at. */
export function orderObject(r: OrderRow) {
  return {
    id: r.id,
    object: "add_on_order" as const,
    account_id: r.account_id,
    release_id: r.release_id,
    add_on: r.add_on,
    name: r.name,
    effect: r.effect,
    store_codes: r.store_codes,
    billing: r.billing,
    currency: r.currency,
    price: statedPrice(r.price, r.currency),
    active: r.active,
    created_at: timestamp(r.created_at) as string,
    expires_at: timestamp(r.expires_at),
  };
}

/** A release's orders (as the caller sees them), oldest first. */
export async function ordersOf(tx: Tx, releaseId: string): Promise<OrderRow[]> {
  return (
    await tx.query<OrderRow>(
      `select ${ORDER_COLUMNS} from internal.add_on_orders o where o.release_id = $1 order by o.created_at, o.id`,
      [releaseId],
    )
  ).rows;
}

export async function orderById(tx: Tx, id: string): Promise<OrderRow | undefined> {
  return (
    await tx.query<OrderRow>(`select ${ORDER_COLUMNS} from internal.add_on_orders o where o.id = $1`, [id])
  ).rows[0];
}

/**
 * The stores a release may not be delivered to: those an add-on of its tenant unlocks (on sale or
 * not: a store is locked while any add-on sells it), less those the release has an active order for.
 */
export async function lockedStores(tx: Tx, releaseId: string): Promise<Set<string>> {
  const rows = (
    await tx.query<{ store: string }>(
      `select distinct u.store from public.releases r
       join internal.accounts a on a.id = r.account_id
       join internal.add_on_settings s on s.tenant_id = a.tenant_id and s.effect = 'unlock_store'
       cross join unnest(s.store_codes) u (store)
       where r.id = $1
         and not exists (select 1 from internal.add_on_orders o
           where o.release_id = r.id and o.effect = 'unlock_store' and u.store = any (o.store_codes)
             and (o.expires_at is null or o.expires_at > now()))`,
      [releaseId],
    )
  ).rows;
  return new Set(rows.map((r) => r.store));
}
