/**
 * The operator's money under /admin/v1/money (docs/payouts.md): settings, fees, exchange rates,
 * advances and expenses, periods and their statements, payees' tax forms, payouts and their
 * batches, and the ledger's trial balance. Every amount is an exact decimal string.
 */
import { admin, adminHeaders, query } from "./admin.ts";
import { errorFrom } from "./errors.ts";

export interface MoneySettings {
  default_currency: string;
  payout_threshold: string;
  payout_requires_aal2: boolean;
}

export interface Fee {
  account_id: string | null;
  release_id: string | null;
  rate: string;
  updated_at: string;
}

export interface Recoupable {
  id: string;
  account_id: string;
  release_id: string | null;
  kind: "advance" | "expense";
  currency: string;
  amount: string;
  unrecouped: string;
  description: string;
  cross_recoup: boolean;
  created_at: string;
}

export interface PeriodTotal {
  currency: string;
  /** What the stores paid (the store holder's balance, negated). */
  received: string;
  fees: string;
  /** What the payees earned (allocations and voids). */
  payees: string;
}

export interface MoneyPeriod {
  period: string;
  status: "open" | "approved";
  approved_at: string | null;
  approved_by: string | null;
  payees: number;
  statements: number;
  totals?: PeriodTotal[];
}

export interface StatementSummary {
  id: string;
  account_id: string;
  payee_id: string;
  period: string;
  currency: string;
  status: string;
  approved_at: string | null;
  opening_balance: string;
  earnings_total: string;
  payments_total: string;
  adjustments_total: string;
  closing_balance: string;
}

export interface Payee {
  id: string;
  account_id: string;
  kind: "account" | "person";
  name: string | null;
  email: string | null;
  claimed: boolean;
  currency: string;
  tax: {
    form: string | null;
    status: string;
    country: string | null;
    tax_id_last4: string | null;
    withholding_rate: string;
  };
  payout_method: { provider: string; [k: string]: unknown } | null;
  created_at: string;
}

export interface Payout {
  id: string;
  payee_id: string;
  account_id: string;
  status: "requested" | "approved" | "paid" | "failed";
  currency: string;
  amount: string;
  withholding: string;
  net_amount: string;
  batch_id: string | null;
  requested_at: string;
  settled_at: string | null;
  failure_reason: string | null;
  provider?: string | null;
  payee_name?: string | null;
  payee_email?: string | null;
}

export interface PayoutBatch {
  id: string;
  provider: string;
  status: string;
  approved_at: string;
  approved_by: string | null;
  exported_at: string | null;
  settled_at: string | null;
  payouts: number;
  currencies: { currency: string; amount: string; net_amount: string; withholding: string }[];
}

export interface LedgerRow {
  currency: string;
  /** null: the currency's total (always zero). */
  holder: string | null;
  balance: string;
  entries: number;
}

export interface Download {
  fileName: string;
  contentType: string;
  blob: Blob;
  headers: Headers;
}

const m = (path: string) => `/money${path}`;
const get = <T>(path: string, params?: Parameters<typeof query>[0]) =>
  admin<T>("GET", `${m(path)}${query(params)}`);
const post = <T>(path: string, body?: unknown) => admin<T>("POST", m(path), body ?? {});
const id = encodeURIComponent;

/** A file the admin API sends (a statement's PDF or CSV, a batch's export), with the caller's headers. */
async function download(path: string, fallbackName: string): Promise<Download> {
  const response = await fetch(`/admin/v1${m(path)}`, { headers: await adminHeaders() });
  if (!response.ok) throw await errorFrom(response);
  const disposition = response.headers.get("content-disposition") ?? "";
  const named = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1];
  return {
    fileName: named ? decodeURIComponent(named) : fallbackName,
    contentType: response.headers.get("content-type") ?? "application/octet-stream",
    blob: await response.blob(),
    headers: response.headers,
  };
}

/** Hands a downloaded file to the browser to save. */
export function save(file: Download): void {
  const url = URL.createObjectURL(file.blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = file.fileName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

export const money = {
  settings: () => get<MoneySettings>("/settings"),
  patchSettings: (body: Partial<MoneySettings>) => admin<MoneySettings>("PATCH", m("/settings"), body),
  fees: () => get<{ data: Fee[] }>("/fees"),
  setFee: (body: { account_id?: string; release_id?: string; rate: string | null }) =>
    post<{ data: Fee[] }>("/fees", body),
  setRate: (body: { period: string; from: string; to: string; rate: string; import_id?: string }) =>
    post<{ ok: true }>("/exchange-rates", body),
  recoupables: (accountId?: string) => get<{ data: Recoupable[] }>("/recoupables", { account_id: accountId }),
  addRecoupable: (body: {
    account_id: string;
    release_id?: string;
    kind: "advance" | "expense";
    currency: string;
    amount: string;
    description: string;
    cross_recoup?: boolean;
  }) => post<Recoupable>("/recoupables", body),
  periods: () => get<{ data: MoneyPeriod[] }>("/periods"),
  approvePeriod: (period: string) =>
    post<{ period: string; statements: unknown[] }>(`/periods/${id(period)}/approve`),
  statements: (params: { period?: string; account_id?: string }) =>
    get<{ data: StatementSummary[] }>("/statements", params),
  statement: (statementId: string) => get<Record<string, unknown>>(`/statements/${id(statementId)}`),
  statementFile: (statementId: string, format: "csv" | "pdf") =>
    download(`/statements/${id(statementId)}?format=${format}`, `statement-${statementId}.${format}`),
  payees: (accountId?: string) => get<{ data: Payee[] }>("/payees", { account_id: accountId }),
  taxReview: (payeeId: string, body: { status: "verified" | "rejected"; withholding_rate?: string }) =>
    post<Payee>(`/payees/${id(payeeId)}/tax-review`, body),
  payouts: (params: { status?: string; batch_id?: string }) => get<{ data: Payout[] }>("/payouts", params),
  batches: () => get<{ data: PayoutBatch[] }>("/payout-batches"),
  batch: (batchId: string) => get<PayoutBatch>(`/payout-batches/${id(batchId)}`),
  approveBatch: (body: { provider: string; currency?: string; payout_ids?: string[] }) =>
    post<PayoutBatch>("/payout-batches", body),
  exportBatch: (batchId: string) =>
    download(`/payout-batches/${id(batchId)}/export`, `payout-batch-${batchId}.csv`),
  settleBatch: (
    batchId: string,
    body: { failed: { payout_id: string; reason: string }[]; reference?: string },
  ) => post<PayoutBatch>(`/payout-batches/${id(batchId)}/settle`, body),
  ledger: () => get<{ data: LedgerRow[] }>("/ledger"),
};
