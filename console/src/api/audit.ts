/**
 * GET /admin/v1/audit (docs/operator.md, "The audit log"; tenant admins only): a page of the
 * tenant's audit log, newest first, or every matching entry as CSV or JSON lines.
 */
import { adminHeaders, type Params, query } from "./admin.ts";
import { errorFrom } from "./errors.ts";
import type { Page } from "./types.ts";

export interface AuditEntry {
  /** The server's numeric id as text: the cursor of the next page (`starting_after`). */
  id: string;
  at: string;
  actor_type: string;
  actor: string;
  actor_detail: Record<string, unknown>;
  ip: string | null;
  action: string;
  object_table: string;
  object_id: string | null;
  before: unknown;
  after: unknown;
}

/** The filters the route reads (src/admin/audit.ts), as the page keeps them in its address. */
export interface AuditFilters {
  actor?: string | undefined;
  action?: string | undefined;
  object?: string | undefined;
  object_table?: string | undefined;
  /** A day (YYYY-MM-DD), UTC: entries from its start. */
  from?: string | undefined;
  /** A day (YYYY-MM-DD), UTC: entries up to its end (the route's `to` is exclusive: the next day). */
  to?: string | undefined;
}

/** The route's query for the page's filters: days become instants, `to` the start of the next day. */
export function auditQuery(filters: AuditFilters): Params {
  const day = (d: string | undefined) => (d && /^\d{4}-\d{2}-\d{2}$/.test(d) ? d : undefined);
  const from = day(filters.from);
  const to = day(filters.to);
  let toInstant: string | undefined;
  if (to) {
    const next = new Date(`${to}T00:00:00Z`);
    next.setUTCDate(next.getUTCDate() + 1);
    toInstant = next.toISOString();
  }
  return {
    actor: filters.actor,
    action: filters.action,
    object: filters.object,
    object_table: filters.object_table,
    from: from ? `${from}T00:00:00Z` : undefined,
    to: toInstant,
  };
}

export async function auditPage(params: Params): Promise<Page<AuditEntry>> {
  const response = await fetch(`/admin/v1/audit${query(params)}`, { headers: await adminHeaders() });
  if (!response.ok) throw await errorFrom(response);
  const body = (await response.json()) as {
    data: (Omit<AuditEntry, "id"> & { id: number })[];
    has_more: boolean;
  };
  return { data: body.data.map((e) => ({ ...e, id: String(e.id) })), has_more: body.has_more };
}

/** Every entry matching the filters, as the server exports it, handed to the browser to save. */
export async function exportAudit(filters: AuditFilters, format: "csv" | "jsonl"): Promise<string> {
  const response = await fetch(`/admin/v1/audit${query({ ...auditQuery(filters), format })}`, {
    headers: await adminHeaders(),
  });
  if (!response.ok) throw await errorFrom(response);
  const blob = await response.blob();
  const fileName = `audit.${format}`;
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return fileName;
}
