/**
 * Small pieces of page both apps use (the console and the portal): waiting, nothing found, a
 * status chip, a time in the reader's zone, a cursor pager, a table that scrolls on a phone, a
 * labelled checkbox. Each app styles them in its own stylesheet by these class names.
 */
import type { ReactNode } from "react";

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p className="loading" role="status" data-testid="loading">
      {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return (
    <p className="empty" data-testid="empty">
      {children}
    </p>
  );
}

export function Status({ value }: { value: string | null | undefined }) {
  const v = value ?? "unknown";
  return (
    <span className={`status status-${v.replace(/[^a-z_]/gi, "")}`} data-testid="status">
      {v.replace(/_/g, " ")}
    </span>
  );
}

export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span className="muted">—</span>;
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return <span>{at}</span>;
  return (
    <time dateTime={date.toISOString()} title={date.toISOString()}>
      {date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}
    </time>
  );
}

export function Pager({
  hasMore,
  canGoBack,
  onNext,
  onPrevious,
  busy,
}: {
  hasMore: boolean;
  canGoBack: boolean;
  onNext: () => void;
  onPrevious: () => void;
  busy?: boolean;
}) {
  if (!hasMore && !canGoBack) return null;
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" onClick={onPrevious} disabled={!canGoBack || busy} data-testid="pager-previous">
        ← Previous
      </button>
      <button type="button" onClick={onNext} disabled={!hasMore || busy} data-testid="pager-next">
        Next →
      </button>
    </nav>
  );
}

/**
 * A table that may scroll sideways on a phone: a labelled region the keyboard can reach, so its
 * hidden columns can be scrolled to without a mouse.
 */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section className="table-wrap" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
}

/** A checkbox with its text as its label. */
export function Checkbox({
  checked,
  onChange,
  testid,
  children,
}: {
  checked: boolean;
  onChange: (checked: boolean) => void;
  testid: string;
  children: ReactNode;
}) {
  return (
    <label>
      <input
        type="checkbox"
        checked={checked}
        onChange={(e) => onChange(e.target.checked)}
        data-testid={testid}
      />{" "}
      {children}
    </label>
  );
}
