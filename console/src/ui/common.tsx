import { type ReactNode, useEffect, useRef } from "react";
import { When } from "../../../ui-shared/common.tsx";
import { hasNavigated } from "../../../ui-shared/router.tsx";
import { describeError } from "../api/errors.ts";

export { Checkbox, Empty, Loading, Pager, Status, TableWrap, When } from "../../../ui-shared/common.tsx";

/** A page: its stable heading (focused when a navigation opens the page, for screen readers) and its body. */
export function Page({
  title,
  testid,
  actions,
  children,
}: {
  title: string;
  testid: string;
  actions?: ReactNode;
  children: ReactNode;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Backline Console`;
    if (hasNavigated()) heading.current?.focus({ preventScroll: true });
  }, [title]);
  return (
    <section className="page" data-testid={testid} aria-labelledby={`${testid}-heading`}>
      <header className="page-head">
        <h1 id={`${testid}-heading`} ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {actions ? <div className="page-actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const { title, detail } = describeError(error);
  return (
    <div className="error-state" role="alert" data-testid="error-state">
      <strong>{title}</strong>
      <p>{detail}</p>
      {onRetry ? (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

/** Any JSON value, readably: objects as definition lists, arrays as lists. */
export function Value({ value }: { value: unknown }): ReactNode {
  if (value === null || value === undefined || value === "") return <span className="muted">—</span>;
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string" || typeof value === "number" || typeof value === "bigint")
    return String(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return <span className="muted">none</span>;
    if (value.every((v) => typeof v !== "object" || v === null)) return value.map(String).join(", ");
    return (
      <ol className="value-list">
        {value.map((v, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: a read-only rendering of a JSON array
          <li key={i}>
            <Value value={v} />
          </li>
        ))}
      </ol>
    );
  }
  return <Fields record={value as Record<string, unknown>} />;
}

/** An identifier (`id`, `…_id`): shown last and as code, since people read names first. */
const isIdKey = (key: string) => key === "id" || key.endsWith("_id");
/** A timestamp (`…_at` holding an ISO date): shown in the reader's time, the exact value on hover. */
const isTimeKey = (key: string, v: unknown) =>
  key.endsWith("_at") && typeof v === "string" && /^\d{4}-\d{2}-\d{2}T/.test(v);

export function Fields({ record, omit = [] }: { record: Record<string, unknown>; omit?: string[] }) {
  const entries = Object.entries(record).filter(([k]) => !omit.includes(k));
  if (entries.length === 0) return <span className="muted">none</span>;
  // A stable sort: the record's own order, identifiers moved after everything else.
  const ordered = [...entries.filter(([k]) => !isIdKey(k)), ...entries.filter(([k]) => isIdKey(k))];
  return (
    <dl className="fields">
      {ordered.map(([key, v]) => (
        <div key={key} className="field" data-field={key}>
          <dt>{key.replace(/_/g, " ")}</dt>
          <dd>
            {isTimeKey(key, v) ? (
              <When at={v as string} />
            ) : isIdKey(key) && typeof v === "string" ? (
              <code className="id">{v}</code>
            ) : (
              <Value value={v} />
            )}
          </dd>
        </div>
      ))}
    </dl>
  );
}
