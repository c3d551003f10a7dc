import { useMutation } from "@tanstack/react-query";
import { useId } from "react";
import { type AuditEntry, type AuditFilters, auditPage, auditQuery, exportAudit } from "../api/audit.ts";
import { Link, setSearch, useLocation } from "../router.tsx";
import { ErrorState, Page, Value, When } from "../ui/common.tsx";
import { SearchSelect, SearchText } from "../ui/filters.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The actions the triggers write (docs/operator.md, "The audit log"), beside any typed in the address. */
const ACTIONS = ["insert", "update", "delete", "mfa.reset", "money.tax_review", "money.payout_method"];

/** Who acted, readably: a user's e-mail, a command, a key. */
function who(e: AuditEntry): string {
  const email = typeof e.actor_detail?.email === "string" ? e.actor_detail.email : null;
  if (e.actor_type === "user") return email ?? `user ${e.actor}`;
  if (e.actor_type === "api_key") return `API key ${e.actor}`;
  if (e.actor_type === "service_key") return "the tenant's service-role key";
  if (e.actor_type === "cli") return e.actor.replace(/^cli:/, "backline ");
  return e.actor_type === "system" ? "Backline (its own work)" : `${e.actor_type} ${e.actor}`;
}

/**
 * The tenant's audit log (GET /admin/v1/audit, admins): who changed what, when and from where,
 * newest first; filters kept in the address; the matching entries exported as CSV or JSON lines.
 */
export default function Audit() {
  const { search } = useLocation();
  const filters: AuditFilters = {
    actor: search.get("actor") ?? undefined,
    action: search.get("action") ?? undefined,
    object: search.get("object") ?? undefined,
    object_table: search.get("object_table") ?? undefined,
    from: search.get("from") ?? undefined,
    to: search.get("to") ?? undefined,
  };
  // ?limit=N (1-500) sets the page size; 50 by default, as the route's.
  const asked = Number(search.get("limit"));
  const limit = Number.isInteger(asked) && asked >= 1 && asked <= 500 ? asked : 50;
  const page = useCursorPage<AuditEntry>("audit", auditPage, auditQuery(filters), limit);
  const exported = useMutation({ mutationFn: (format: "csv" | "jsonl") => exportAudit(filters, format) });
  const ids = useId();
  const filtered = Object.values(filters).some(Boolean);
  const action = filters.action ?? "";
  return (
    <Page
      title="Audit log"
      testid="page-audit"
      actions={
        <>
          <button
            type="button"
            onClick={() => exported.mutate("csv")}
            disabled={exported.isPending}
            data-testid="audit-export-csv"
          >
            Export CSV
          </button>
          <button
            type="button"
            onClick={() => exported.mutate("jsonl")}
            disabled={exported.isPending}
            data-testid="audit-export-jsonl"
          >
            Export JSON lines
          </button>
        </>
      }
    >
      <p className="help">
        Every change to who can do what, and everything staff do for this tenant, newest first. The exports
        hold every entry the filters match{filtered ? "" : " (the whole log)"}.
      </p>
      <form className="filters" aria-label="Filter the audit log" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label htmlFor={`${ids}-actor`}>Who (user, key id or cli:command)</label>
          <SearchText
            key={`actor-${filters.actor ?? ""}`}
            id={`${ids}-actor`}
            param="actor"
            value={filters.actor ?? ""}
            testid="audit-filter-actor"
          />
        </div>
        <SearchSelect
          label="Action"
          param="action"
          value={action}
          choices={[["", "any"], ...(action && !ACTIONS.includes(action) ? [action] : []), ...ACTIONS]}
          testid="audit-filter-action"
        />
        <div>
          <label htmlFor={`${ids}-table`}>Table</label>
          <SearchText
            key={`table-${filters.object_table ?? ""}`}
            id={`${ids}-table`}
            param="object_table"
            value={filters.object_table ?? ""}
            placeholder="internal.stores"
            testid="audit-filter-table"
          />
        </div>
        <div>
          <label htmlFor={`${ids}-object`}>Object id</label>
          <SearchText
            key={`object-${filters.object ?? ""}`}
            id={`${ids}-object`}
            param="object"
            value={filters.object ?? ""}
            testid="audit-filter-object"
          />
        </div>
        <DayFilter id={`${ids}-from`} label="From (day, UTC)" param="from" value={filters.from} />
        <DayFilter id={`${ids}-to`} label="To (day, UTC, included)" param="to" value={filters.to} />
        {filtered ? (
          <div>
            <Link to="/audit" className="button-link" data-testid="audit-filter-clear">
              Clear the filters
            </Link>
          </div>
        ) : null}
      </form>
      {exported.isError ? <ErrorState error={exported.error} /> : null}
      {exported.isSuccess ? (
        <p role="status" data-testid="audit-exported">
          Saved {exported.data}.
        </p>
      ) : null}
      <PagedTable
        page={page}
        label="Audit log"
        testid="audit-table"
        caption="Audit log entries, newest first"
        empty={filtered ? "No entry matches these filters." : "Nothing recorded yet."}
        cards
        columns={["When", "Who", "Action", "Object", "Changes", "From"]}
        row={(e) => (
          <tr
            key={e.id}
            data-testid="audit-row"
            data-audit-id={e.id}
            data-action={e.action}
            data-table={e.object_table}
          >
            <th scope="row">
              <When at={e.at} />
            </th>
            <td data-label="Who" data-testid="audit-who">
              {who(e)}
            </td>
            <td data-label="Action">{e.action}</td>
            <td data-label="Object">
              <code>{e.object_table}</code>
              {e.object_id ? (
                <div>
                  <code className="id">{e.object_id}</code>
                </div>
              ) : null}
            </td>
            <td data-label="Changes">
              <Changes before={e.before} after={e.after} />
            </td>
            <td data-label="From">{e.ip ?? "—"}</td>
          </tr>
        )}
      />
    </Page>
  );
}

/** A day filter: applied as soon as a whole day is chosen. */
function DayFilter({
  id,
  label,
  param,
  value,
}: {
  id: string;
  label: string;
  param: string;
  value: string | undefined;
}) {
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="date"
        value={value ?? ""}
        onChange={(e) => setSearch({ [param]: e.target.value }, { replace: true })}
        data-testid={`audit-filter-${param}`}
      />
    </div>
  );
}

/** The changed columns: before and after, folded away (an insert's row can be long). */
function Changes({ before, after }: { before: unknown; after: unknown }) {
  const has = (v: unknown) =>
    v !== null && v !== undefined && !(typeof v === "object" && Object.keys(v).length === 0);
  if (!has(before) && !has(after)) return <span className="muted">—</span>;
  return (
    <details>
      <summary>
        {has(before) && has(after)
          ? `${Object.keys(after as object).length} changed`
          : has(after)
            ? "the new row"
            : "the removed row"}
      </summary>
      {has(before) ? (
        <>
          <p className="muted">Before</p>
          <Value value={before} />
        </>
      ) : null}
      {has(after) ? (
        <>
          <p className="muted">After</p>
          <Value value={after} />
        </>
      ) : null}
    </details>
  );
}
