/**
 * The tax an invoice to a white-label tenant carries (docs/operator.md, "Plans and invoices",
 * "Tax"). The supply is an electronically supplied service from the installation (the issuer)
 * to the tenant (the customer), so under the EU VAT directive (Council Directive 2006/112/EC):
 *
 * | issuer | customer                                        | rule                | rate                    |
 * |--------|-------------------------------------------------|---------------------|-------------------------|
 * | EU     | same country                                    | `domestic`          | the issuer's country's  |
 * | EU     | another member state, with a VAT id             | `eu_reverse_charge` | 0, the customer accounts for it (art. 196) |
 * | EU     | another member state, no VAT id (a consumer)    | `eu_consumer`       | the customer's country's (art. 58, One-Stop Shop) |
 * | EU     | outside the EU                                  | `outside_eu`        | 0, outside the scope (art. 44 / 59) |
 * | not EU | same country                                    | `domestic`          | the issuer's `tax_rates` entry for it, else 0 |
 * | not EU | another country                                 | `not_applicable`    | 0                       |
 *
 * A country's rate is the issuer's own `tax_rates` entry when it has one (rates change: the
 * operator keeps them current), else the standard rate of `EU_STANDARD_RATES`. The VAT id is
 * checked for its form only (two letters and 2–18 characters); Backline does not ask VIES.
 */

/** EU member states' standard VAT rates in percent (as of 2026; an issuer's tax_rates override them). */
export const EU_STANDARD_RATES: Readonly<Record<string, string>> = {
  AT: "20",
  BE: "21",
  BG: "20",
  CY: "19",
  CZ: "21",
  DE: "19",
  DK: "25",
  EE: "24",
  ES: "21",
  FI: "25.5",
  FR: "20",
  GR: "24",
  HR: "25",
  HU: "27",
  IE: "23",
  IT: "22",
  LT: "21",
  LU: "17",
  LV: "21",
  MT: "18",
  NL: "21",
  PL: "23",
  PT: "23",
  RO: "21",
  SE: "25",
  SI: "22",
  SK: "23",
};

export type TaxRule = "domestic" | "eu_reverse_charge" | "eu_consumer" | "outside_eu" | "not_applicable";

export interface TaxParty {
  country: string;
  vat_id?: string | null;
}

export interface TaxDecision {
  rule: TaxRule;
  /** Percent, a decimal string. */
  rate: string;
  /** What the invoice says about it (the legal mention of a reverse charge, and so on). */
  note: string;
}

export const isEu = (country: string): boolean => country in EU_STANDARD_RATES;

export function decideTax(
  issuer: TaxParty & { tax_rates?: Record<string, string> | null },
  customer: TaxParty,
): TaxDecision {
  const rateOf = (country: string): string | undefined =>
    issuer.tax_rates?.[country] ?? EU_STANDARD_RATES[country];
  if (!isEu(issuer.country)) {
    if (customer.country === issuer.country) {
      const rate = issuer.tax_rates?.[issuer.country] ?? "0";
      return { rule: "domestic", rate, note: rate === "0" ? "" : `Tax at ${rate}%.` };
    }
    return {
      rule: "not_applicable",
      rate: "0",
      note: "No tax charged by the supplier for a customer abroad.",
    };
  }
  if (customer.country === issuer.country) {
    const rate = rateOf(issuer.country) ?? "0";
    return { rule: "domestic", rate, note: `VAT ${rate}%.` };
  }
  if (isEu(customer.country)) {
    if (customer.vat_id) {
      return {
        rule: "eu_reverse_charge",
        rate: "0",
        note: `Reverse charge: VAT to be accounted for by the recipient (Article 196, Council Directive 2006/112/EC). Customer VAT ID ${customer.vat_id}.`,
      };
    }
    const rate = rateOf(customer.country) ?? "0";
    return {
      rule: "eu_consumer",
      rate,
      note: `VAT ${rate}% of ${customer.country} (place of supply: the customer's member state, Article 58; declared through the One-Stop Shop).`,
    };
  }
  return {
    rule: "outside_eu",
    rate: "0",
    note: "Outside the scope of EU VAT: the place of supply is the customer's country (Article 44, Council Directive 2006/112/EC).",
  };
}
