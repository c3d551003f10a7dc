/**
 * Add-ons on the public API (docs/public-api.md "Add-ons"): what the tenant sells for a release,
 * a release's orders, and buying one — with the member's own token and the account named. Who may
 * buy is the database's to decide (owners, admins and members; never a viewer).
 */
import { call } from "./public.ts";

export interface AddOn {
  code: string;
  name: string;
  description: string;
  price: string;
  currency: string;
  billing: "per_release" | "per_year";
  effect: "unlock_store" | "priority_review" | "informational";
  store_codes: string[];
}

export interface AddOnOrder {
  id: string;
  add_on: string;
  name: string;
  billing: "per_release" | "per_year";
  currency: string;
  price: string;
  active: boolean;
  created_at: string;
  expires_at: string | null;
}

export const listAddOns = async (accountId: string): Promise<AddOn[]> =>
  (await call<{ data: AddOn[] }>(accountId, "GET", "/add-ons")).data;

export const listReleaseAddOns = async (accountId: string, releaseId: string): Promise<AddOnOrder[]> =>
  (await call<{ data: AddOnOrder[] }>(accountId, "GET", `/releases/${encodeURIComponent(releaseId)}/add-ons`))
    .data;

export const buyAddOn = (accountId: string, releaseId: string, code: string): Promise<AddOnOrder> =>
  call<AddOnOrder>(accountId, "POST", `/releases/${encodeURIComponent(releaseId)}/add-ons`, { add_on: code });

/** "4.99 USD a year" / "4.99 USD once": the price in the member's words. */
export const priceWords = (a: { price: string; currency: string; billing: AddOn["billing"] }): string =>
  `${a.price} ${a.currency} ${a.billing === "per_year" ? "a year" : "once"}`;

const AND = new Intl.ListFormat("en-GB", { type: "conjunction" });

/**
 * What an add-on does, in the member's words: the stores it unlocks by their names (`storeName`,
 * from GET /rules' stores), never their codes; a store the rules do not list (turned off) is
 * "another store".
 */
export function effectWords(a: AddOn, storeName: (code: string) => string | undefined): string {
  if (a.effect === "unlock_store") {
    const names = a.store_codes.map(storeName).filter((n): n is string => Boolean(n));
    const others = a.store_codes.length - names.length;
    if (others > 0) names.push(others === 1 ? "another store" : `${others} other stores`);
    return `Delivers this release to ${AND.format(names)}.`;
  }
  if (a.effect === "priority_review") return "Your release is reviewed before the others waiting.";
  return "Our team takes care of it for this release.";
}
