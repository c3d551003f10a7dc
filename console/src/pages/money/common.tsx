/**
 * What the money pages share: their sub-navigation, the caller's role (most reads need operator,
 * most decisions admin), an error next to the field it is about, and a list shown a page at a
 * time ("Show more": the admin API answers these lists whole, newest first).
 */
import { useQuery } from "@tanstack/react-query";
import { type ReactNode, useState } from "react";
import { groupDigits } from "../../../../ui-shared/money.ts";
import { api } from "../../api/admin.ts";
import { ApiError } from "../../api/errors.ts";
import { getSession } from "../../api/session.ts";
import { atLeast, type Role, roleOn } from "../../roles.ts";
import { Link, useLocation } from "../../router.tsx";
import { fieldProblems } from "../../ui/field-errors.ts";

export const MONEY_PAGES = [
  { to: "/money/periods", label: "Periods" },
  { to: "/money/payouts", label: "Payouts" },
  { to: "/money/recoupables", label: "Advances and expenses" },
  { to: "/money/settings", label: "Fees and settings" },
  { to: "/money/tax-forms", label: "Tax forms" },
  { to: "/money/ledger", label: "Ledger" },
] as const;

export function MoneyTabs() {
  const { path } = useLocation();
  return (
    <nav className="money-tabs" aria-label="Money">
      <ul>
        {MONEY_PAGES.map((p) => (
          <li key={p.to}>
            <Link
              to={p.to}
              aria-current={
                path === p.to ||
                path.startsWith(`${p.to}/`) ||
                (p.to === "/money/periods" && path.startsWith("/money/statements/"))
                  ? "page"
                  : undefined
              }
              data-testid={`money-tab-${p.to.slice("/money/".length)}`}
            >
              {p.label}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/** The signed-in user's role on the tenant acted on (the /me the app already asked for). */
export function useRole(): Role | null {
  const me = useQuery({ queryKey: ["me"], queryFn: api.me, staleTime: 60_000 });
  return roleOn(me.data, getSession()?.actingTenantId);
}

export const isAdmin = (role: Role | null) => atLeast(role, "admin");

/** Said where a form would be, for an operator: the decision needs the admin role. */
export function NeedsAdmin({ what }: { what: string }) {
  return (
    <p className="help" data-testid="needs-admin">
      {what} needs the <strong>admin</strong> role.
    </p>
  );
}

/**
 * The message of an API error about `param` (or one of its sub-fields: `lines[0].amount` is about
 * `lines`), in plain words without the API's field path (`payout_threshold: must be…` is said
 * "Must be…" under the threshold), if it is about it.
 */
export function fieldError(error: unknown, ...params: string[]): string | undefined {
  const problems = fieldProblems(error);
  for (const param of params) {
    const messages = problems
      .filter((p) => p.param === param || p.param.startsWith(`${param}.`) || p.param.startsWith(`${param}[`))
      .map((p) => p.message)
      .filter((m, i, all) => m !== "" && all.indexOf(m) === i);
    if (messages.length > 0) return messages.join(" ");
  }
  return undefined;
}

/**
 * The error of a form that no field claims, in words; a refused field the form does not show is
 * said in plain words too (without its path).
 */
export function formError(error: unknown, params: string[]): string | undefined {
  if (!error) return undefined;
  if (params.some((p) => fieldError(error, p))) return undefined;
  if (error instanceof ApiError) {
    if (error.code === "insufficient_role") return `Your role is too low: ${error.message}`;
    if (error.status === 401) return "Your session has ended: sign in again.";
    const unclaimed = fieldProblems(error)
      .map((p) => p.message)
      .filter((m, i, all) => m !== "" && all.indexOf(m) === i);
    return unclaimed.length > 0 ? unclaimed.join(" ") : error.message;
  }
  if (error instanceof TypeError) return "The server could not be reached.";
  return error instanceof Error ? error.message : String(error);
}

/** A message under a field, tied to it by `id` (aria-describedby); empty when there is none. */
export function FieldError({ id, message }: { id: string; message: string | undefined }) {
  return (
    <p id={id} className="error-text" data-testid={message ? "field-error" : undefined}>
      {message ?? ""}
    </p>
  );
}

/** A form's error that belongs to no field. */
export function FormError({ message, testid }: { message: string | undefined; testid?: string }) {
  if (!message) return null;
  return (
    <p className="error-text" role="alert" data-testid={testid ?? "form-error"}>
      {message}
    </p>
  );
}

/** The first `step` rows, and a button for the next `step` (no count: a long list is not totalled). */
export function useShowMore<T>(rows: readonly T[], step = 25) {
  const [shown, setShown] = useState(step);
  return {
    rows: rows.slice(0, shown),
    more:
      rows.length > shown ? (
        <p>
          <button type="button" onClick={() => setShown((n) => n + step)} data-testid="show-more">
            Show more
          </button>
        </p>
      ) : null,
  };
}

/** An exact amount (every digit the API gave), thousands grouped, with its currency. */
export function Amount({ value, currency }: { value: string | null | undefined; currency?: string }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return (
    <span className="amount" data-amount={value}>
      {groupDigits(value)}
      {currency ? ` ${currency}` : ""}
    </span>
  );
}

/** An id shown short, the whole of it for copying and hovering. */
export function ShortId({ id }: { id: string | null | undefined }) {
  if (!id) return <span className="muted">—</span>;
  return (
    <code className="id" title={id}>
      {id.slice(0, 8)}
    </code>
  );
}

export function Section({
  title,
  id,
  testid,
  children,
}: {
  title: string;
  id: string;
  testid?: string;
  children: ReactNode;
}) {
  return (
    <section className="card" aria-labelledby={id} data-testid={testid}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

/**
 * An account to act on: chosen from the tenant's accounts when the caller may list them (admin),
 * else typed as its id (an operator).
 */
export function AccountField({
  id,
  value,
  onChange,
  error,
  testid,
  optional,
}: {
  id: string;
  value: string;
  onChange: (v: string) => void;
  error: string | undefined;
  testid: string;
  optional?: string;
}) {
  const role = useRole();
  const accounts = useQuery({
    queryKey: ["money", "accounts"],
    queryFn: () => api.accounts({ limit: 100 }),
    enabled: isAdmin(role),
    staleTime: 60_000,
  });
  const common = {
    id,
    value,
    "aria-invalid": Boolean(error),
    "aria-describedby": `${id}-error`,
    "data-testid": testid,
  };
  return (
    <div>
      <label htmlFor={id}>Account{optional ? ` (${optional})` : ""}</label>
      {accounts.data ? (
        <select {...common} onChange={(e) => onChange(e.target.value)}>
          <option value="">{optional ? "— none —" : "Choose an account"}</option>
          {accounts.data.data.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name ?? a.id}
            </option>
          ))}
        </select>
      ) : (
        <input {...common} placeholder="the account's id" onChange={(e) => onChange(e.target.value)} />
      )}
      <FieldError id={`${id}-error`} message={error} />
    </div>
  );
}

/** The names of the tenant's accounts, when the caller may list them (admin). */
export function useAccountNames(): Map<string, string> {
  const role = useRole();
  const accounts = useQuery({
    queryKey: ["money", "accounts"],
    queryFn: () => api.accounts({ limit: 100 }),
    enabled: isAdmin(role),
    staleTime: 60_000,
  });
  return new Map((accounts.data?.data ?? []).map((a) => [a.id, a.name ?? a.id]));
}
