import type { DbRole } from "./types.ts";

/**
 * Database errors, normalised across node-postgres and PGlite, and the one table that maps a
 * SQLSTATE to an HTTP status and a machine-readable code. Every HTTP surface uses this mapping
 * and only changes the shape of the body.
 */

export interface DbError {
  sqlstate: string;
  message: string;
  detail: string | undefined;
  hint: string | undefined;
  constraint: string | undefined;
  table: string | undefined;
  column: string | undefined;
}

/** The database error inside `error`, if it is one (both drivers put the SQLSTATE in `code`). */
export function asDbError(error: unknown): DbError | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const e = error as Record<string, unknown>;
  if (typeof e.code !== "string" || !/^[0-9A-Z]{5}$/.test(e.code) || typeof e.message !== "string")
    return undefined;
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  return {
    sqlstate: e.code,
    message: e.message,
    detail: str(e.detail),
    hint: str(e.hint),
    constraint: str(e.constraint),
    table: str(e.table),
    column: str(e.column),
  };
}

/** Backline's own rule violations, raised by the catalog triggers (migrations 0005 and 0007). */
export const RULE_VIOLATIONS = {
  BL001: { code: "release_not_editable", status: 409 },
  BL002: { code: "invalid_status_transition", status: 409 },
  BL003: { code: "takedown_not_allowed", status: 409 },
  BL004: { code: "operator_only", status: 403 },
  BL005: { code: "release_not_delivered", status: 409 },
  BL006: { code: "isrc_in_use", status: 409 },
  BL007: { code: "oac_not_eligible", status: 409 },
  // Migration 0013: an API key asked for more than its scopes allow (its detail names the scope).
  BL014: { code: "insufficient_scope", status: 403 },
  // Migration 0020: an account setting only its owner may change; an act that needs an aal2 session.
  BL023: { code: "not_account_owner", status: 403 },
  BL024: { code: "aal2_required", status: 403 },
} as const satisfies Record<string, { code: string; status: number }>;

export interface ErrorMapping {
  status: number;
  code: string;
}

/**
 * SQLSTATE -> HTTP status, following PostgREST where it has a rule (docs/errors.md). `role` decides
 * 42501: a missing privilege is 401 for an anonymous caller (log in first) and 403 for anyone else.
 */
export function mapDbError(e: DbError, role: DbRole = "authenticated"): ErrorMapping {
  const rule = RULE_VIOLATIONS[e.sqlstate as keyof typeof RULE_VIOLATIONS];
  if (rule) return { status: rule.status, code: rule.code };
  // PostgREST's convention: a function may choose the status with SQLSTATE 'PTnnn'.
  const pt = /^PT([1-5]\d\d)$/.exec(e.sqlstate);
  if (pt?.[1]) return { status: Number(pt[1]), code: "raised" };
  switch (e.sqlstate) {
    case "23505":
      return { status: 409, code: "unique_violation" };
    case "23503":
      return { status: 409, code: "foreign_key_violation" };
    case "23001":
      // ON DELETE RESTRICT (PostgreSQL 18 reports it as its own SQLSTATE): still referenced.
      return { status: 409, code: "restrict_violation" };
    case "23502":
      return { status: 400, code: "not_null_violation" };
    case "23514":
      return { status: 400, code: "check_violation" };
    case "23P01":
      return { status: 409, code: "exclusion_violation" };
    case "42501":
      return { status: role === "anon" ? 401 : 403, code: "insufficient_privilege" };
    case "42883":
      // No such function or operator for these types (e.g. ov on jsonb): PostgREST answers 404.
      return { status: 404, code: "undefined_function" };
    case "25006":
      return { status: 405, code: "read_only_transaction" };
    case "P0001":
      return { status: 400, code: "raise_exception" };
    case "57014":
      return { status: 504, code: "statement_timeout" };
    case "40001":
    case "40P01":
      return { status: 409, code: "serialization_failure" };
    case "53300":
    case "53400":
      return { status: 503, code: "too_many_connections" };
  }
  // Class 22 (data exception: bad uuid, bad date, out of range) and 42 (undefined column...) are the caller's.
  if (e.sqlstate.startsWith("22")) return { status: 400, code: "invalid_value" };
  if (e.sqlstate.startsWith("42")) return { status: 400, code: "invalid_request" };
  if (e.sqlstate.startsWith("08")) return { status: 503, code: "database_unavailable" };
  return { status: 500, code: "internal_error" };
}

/**
 * A busy database (503) or a cancelled statement (504): the caller may retry, the message is
 * safe to show, and it is not logged as a failure (under overload that would be a line per refusal).
 */
export function isRetryable(mapping: ErrorMapping): boolean {
  return mapping.status === 503 || mapping.status === 504;
}
