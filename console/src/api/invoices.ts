/**
 * The tenant's plan and invoices under /admin/v1 (docs/operator.md, "Plans and invoices"): what a
 * tenant's admin reads of what the installation bills it. Every amount is an exact decimal string.
 */
import { admin, adminHeaders, query } from "./admin.ts";
import { errorFrom } from "./errors.ts";

export interface Plan {
  id: string;
  name: string;
  currency: string;
  monthly_fee: string;
  included_accounts: number;
  included_releases: number;
  included_tracks: number;
  included_storage_gb: number;
  included_api_calls: number;
}

export interface TenantBilling {
  tenant_id: string;
  customer: { legal_name: string; country: string; vat_id: string | null } | null;
  plan: Plan | null;
}

export interface Invoice {
  id: string;
  number: string;
  month: string;
  issued_at: string;
  due_on: string;
  currency: string;
  subtotal: string;
  tax: string;
  total: string;
  paid: string;
  balance: string;
  status: "open" | "overdue" | "paid";
}

export interface InvoiceFile {
  fileName: string;
  blob: Blob;
}

export const invoices = {
  billing: () => admin<TenantBilling>("GET", "/billing/tenant"),
  list: (status?: "open" | "overdue" | "paid") =>
    admin<{ data: Invoice[] }>("GET", `/invoices${query({ status })}`),
  /** The invoice's PDF or CSV, with the caller's headers. */
  file: async (invoice: Invoice, format: "pdf" | "csv"): Promise<InvoiceFile> => {
    const response = await fetch(`/admin/v1/invoices/${encodeURIComponent(invoice.id)}?format=${format}`, {
      headers: await adminHeaders(),
    });
    if (!response.ok) throw await errorFrom(response);
    return { fileName: `invoice-${invoice.number}.${format}`, blob: await response.blob() };
  },
};
