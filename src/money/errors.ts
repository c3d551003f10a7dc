/**
 * The money model's refusals (docs/payouts.md, "Errors"), each with a machine-readable code and the
 * HTTP status the admin and public APIs answer it with.
 */
export const MONEY_ERROR_STATUS = {
  not_found: 404,
  period_not_started: 409,
  period_approved: 409,
  earlier_period_open: 409,
  rate_missing: 422,
  nothing_to_pay: 409,
  batch_settled: 409,
  not_in_batch: 422,
  payout_needs_person: 403,
  aal2_required: 403,
  tax_form_required: 422,
  payout_method_required: 422,
  payout_open: 409,
  below_threshold: 422,
  not_settleable: 409,
  splits_total: 422,
  amount_precision: 422,
} as const;
export type MoneyErrorCode = keyof typeof MONEY_ERROR_STATUS;

export class MoneyError extends Error {
  readonly code: MoneyErrorCode;
  readonly status: number;
  readonly param: string | undefined;

  constructor(code: MoneyErrorCode, message: string, param?: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = MONEY_ERROR_STATUS[code];
    this.param = param;
  }
}

/** A refusal raised by the database's money functions (their DETAIL is the code), as a MoneyError. */
export function moneyErrorOf(
  error: { message: string; detail?: string | undefined } | undefined,
): MoneyError | undefined {
  const code = error?.detail;
  if (!error || !code || !(code in MONEY_ERROR_STATUS)) return undefined;
  return new MoneyError(code as MoneyErrorCode, error.message);
}
