/**
 * The portal's page pieces: a page with its heading (focused when a navigation opens it), a labelled field with its error
 * beside it, a form-level message, a plain error with a retry. The smaller shared ones (loading,
 * empty, status, time, pager) are ui-shared/common.tsx's.
 */
import {
  type InputHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  useEffect,
  useId,
  useRef,
} from "react";
import { hasNavigated } from "../../ui-shared/router.tsx";
import { currentTenant, type Field as FieldName, PlainError } from "./api/portal.ts";

export function Page({
  title,
  testid,
  actions,
  children,
  narrow,
}: {
  title: string;
  testid: string;
  actions?: ReactNode;
  children: ReactNode;
  narrow?: boolean;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · ${currentTenant().name}`;
    if (hasNavigated()) heading.current?.focus({ preventScroll: true });
  }, [title]);
  return (
    <section
      className={narrow ? "page narrow" : "page"}
      data-testid={testid}
      aria-labelledby={`${testid}-heading`}
    >
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

/** The message of a failure that belongs to `field` (or to no field, for `field` undefined). */
export function errorFor(error: unknown, field: FieldName | undefined): string | undefined {
  if (!error) return undefined;
  if (error instanceof PlainError) {
    if (field === undefined)
      return error.field === undefined && Object.keys(error.fields).length === 0 ? error.message : undefined;
    return error.fields[field];
  }
  return field === undefined ? "That did not work. Try again." : undefined;
}

export function Field({
  label,
  error,
  hint,
  testid,
  ...input
}: InputHTMLAttributes<HTMLInputElement> & {
  label: string;
  error?: string | undefined;
  hint?: ReactNode;
  testid: string;
}) {
  const generated = useId();
  const id = input.id ?? generated;
  return (
    <FieldFrame id={id} label={label} hint={hint} error={error} testid={testid}>
      <input
        {...input}
        id={id}
        data-testid={testid}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(id, hint, error)}
      />
    </FieldFrame>
  );
}

const describedBy = (id: string, hint: ReactNode, error: string | undefined) =>
  [hint ? `${id}-hint` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;

/** A field's label, hint and error around its control. */
function FieldFrame({
  id,
  label,
  hint,
  error,
  testid,
  children,
}: {
  id: string;
  label: string;
  hint: ReactNode;
  error: string | undefined;
  testid: string;
  children: ReactNode;
}) {
  return (
    <div className={error ? "field has-error" : "field"}>
      <label htmlFor={id}>{label}</label>
      {hint ? (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      ) : null}
      {children}
      {error ? (
        <p className="field-error" id={`${id}-error`} role="alert" data-testid={`${testid}-error`}>
          {error}
        </p>
      ) : null}
    </div>
  );
}

/** A labelled choice among `options` ([value, words]), its error beside it as Field's. */
export function SelectField({
  label,
  error,
  hint,
  testid,
  options,
  ...select
}: SelectHTMLAttributes<HTMLSelectElement> & {
  label: string;
  error?: string | undefined;
  hint?: ReactNode;
  testid: string;
  options: readonly (readonly [string, string])[];
}) {
  const generated = useId();
  const id = select.id ?? generated;
  return (
    <FieldFrame id={id} label={label} hint={hint} error={error} testid={testid}>
      <select
        {...select}
        id={id}
        data-testid={testid}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(id, hint, error)}
      >
        {options.map(([value, words]) => (
          <option key={value} value={value}>
            {words}
          </option>
        ))}
      </select>
    </FieldFrame>
  );
}

/**
 * A failure that belongs to no one field, shown above the form's button; with `shown` (the
 * fields the form has), also what the server said of a field the form does not show.
 */
export function FormError({
  error,
  testid = "form-error",
  shown,
}: {
  error: unknown;
  testid?: string;
  shown?: readonly string[];
}) {
  const elsewhere =
    shown && error instanceof PlainError
      ? Object.entries(error.fields)
          .filter(([field]) => !shown.includes(field))
          .map(([, m]) => m)
      : [];
  const message = errorFor(error, undefined) ?? (elsewhere.length > 0 ? elsewhere.join(" ") : undefined);
  if (!message) return null;
  return (
    <p className="form-error" role="alert" data-testid={testid}>
      {message}
    </p>
  );
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const message = error instanceof PlainError ? error.message : "Something went wrong. Try again.";
  return (
    <div className="error-state" role="alert" data-testid="error-state">
      <p>{message}</p>
      {onRetry ? (
        <button type="button" className="secondary" onClick={onRetry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function Notice({ children, testid }: { children: ReactNode; testid: string }) {
  return (
    <div className="notice" role="status" data-testid={testid}>
      {children}
    </div>
  );
}
