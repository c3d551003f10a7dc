/**
 * Amounts as the APIs give them: decimal strings ("1234.567891"), never floats. Shown rounded to
 * cents, half away from zero, by string arithmetic (nothing is lost on the way: the exact
 * string is what an export carries); a chart, which only draws, takes `toNumber`.
 */

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/;

/** `amount` rounded to `places` decimals, half away from zero: "2.005" → "2.01". */
export function roundAmount(amount: string, places = 2): string {
  const m = DECIMAL.exec(amount.trim());
  if (!m) return amount;
  const [, sign, whole, frac = ""] = m;
  const padded = (frac + "0".repeat(places + 1)).slice(0, places + 1);
  let digits = BigInt((whole as string) + padded.slice(0, places));
  if (Number(padded[places]) >= 5) digits += 1n;
  const text = digits.toString().padStart(places + 1, "0");
  const int = text.slice(0, text.length - places);
  const dec = places > 0 ? `.${text.slice(-places)}` : "";
  const zero = /^0*$/.test(int + dec.slice(1));
  return `${sign && !zero ? "-" : ""}${int}${dec}`;
}

/** A count or an amount with thousands separated: "12345.60" → "12,345.60". */
export function groupDigits(value: string | number): string {
  const [int = "", dec] = String(value).split(".");
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return dec === undefined ? grouped : `${grouped}.${dec}`;
}

/** "1,234.57 EUR": an amount for people, in its currency. */
export function money(amount: string, currency: string): string {
  return `${groupDigits(roundAmount(amount))} ${currency}`;
}

/** For drawing only (a chart's bar length): the amount as a JavaScript number. */
export function toNumber(amount: string): number {
  return Number(amount);
}
