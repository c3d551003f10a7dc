import { groupDigits, roundAmount } from "../../../../ui-shared/money.ts";

/** The decimals a currency is stated in (docs/payouts.md, "Rounding"). */
const NO_DECIMALS = new Set(["JPY", "KRW", "CLP", "ISK", "VND", "XAF", "XOF", "UGX", "PYG", "HUF", "TWD"]);
const THREE_DECIMALS = new Set(["BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD"]);
export const placesOf = (currency: string): number =>
  NO_DECIMALS.has(currency) ? 0 : THREE_DECIMALS.has(currency) ? 3 : 2;

/**
 * "1,234.57 USD": an exact decimal string for people, rounded (half away from zero) to the
 * currency's minor unit only here, for display; the API's string is what files carry.
 */
export function amount(value: string, currency: string): string {
  return `${groupDigits(roundAmount(value, placesOf(currency)))} ${currency}`;
}

/** "2026-03" → "March 2026". */
export function periodName(period: string): string {
  const [y, m] = period.split("-");
  const names = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
  ];
  return `${names[Number(m) - 1] ?? m} ${y}`;
}

export const TAX_STATUS_WORDS: Record<string, string> = {
  missing: "No tax form yet",
  pending: "Filed, being checked",
  verified: "Verified",
  rejected: "Not accepted: file it again",
};

export const PAYOUT_STATUS_WORDS: Record<string, string> = {
  requested: "requested",
  approved: "approved, being paid",
  paid: "paid",
  failed: "failed: the money is back in your balance",
};
