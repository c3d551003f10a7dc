import type { FastifyRequest } from "fastify";
import { asDbError, mapDbError } from "../db/errors.ts";
import { JsonLimitError } from "../http/body-limits.ts";
import type { FieldError } from "../http/field-errors.ts";
import { TITLES } from "../http/problem.ts";

/**
 * The public API's one error shape (docs/public-api.md, "Errors"): RFC 9457 problem details with
 * a machine-readable `code`, the `param` at fault, the `request_id`, and for validation failures
 * `errors`, every failing field at once.
 */
export type { FieldError } from "../http/field-errors.ts";

export interface ApiProblem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  param?: string;
  errors?: FieldError[];
  request_id: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | undefined;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    extra: { param?: string; errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.param = extra.param ?? extra.errors?.[0]?.param;
    this.errors = extra.errors;
    this.headers = extra.headers ?? {};
  }
}

export const notFound = (what: string, id: string): ApiError =>
  new ApiError(404, "resource_missing", `No ${what} with id ${id} in this account.`, { param: "id" });

export const validationFailed = (errors: FieldError[]): ApiError =>
  new ApiError(
    422,
    "validation_failed",
    errors.length === 1 ? (errors[0]?.message ?? "Invalid request.") : `${errors.length} fields are invalid.`,
    { errors },
  );

// Public-API names for what the database reports, where they differ from src/db/errors.ts.
const DB_CODES: Record<string, string> = {
  unique_violation: "conflict",
  foreign_key_violation: "conflict",
  restrict_violation: "resource_in_use",
  check_violation: "invalid_value",
  not_null_violation: "missing_value",
  insufficient_privilege: "forbidden",
};

const TIMEOUT_DETAIL =
  "The request ran longer than its statement timeout and was cancelled; narrow it (filters, a smaller page) or retry later.";

function scopeDetail(detail: string | undefined): { scope?: string; param?: string } {
  try {
    const parsed = JSON.parse(detail ?? "{}") as { scope?: unknown; param?: unknown };
    const scope =
      typeof parsed.scope === "string" && /^[a-z]+:[a-z]+( [a-z]+:[a-z]+)*$/.test(parsed.scope)
        ? parsed.scope
        : undefined;
    const param = typeof parsed.param === "string" ? parsed.param : undefined;
    return { ...(scope ? { scope } : {}), ...(param ? { param } : {}) };
  } catch {
    return {};
  }
}

export interface Rendered {
  status: number;
  headers: Record<string, string>;
  body: ApiProblem;
}

/** Any error as the response it becomes; unknown errors are logged and answered 500 without internals. */
export function renderError(error: unknown, request: FastifyRequest): Rendered {
  const base = (status: number, code: string, detail: string, param?: string, errors?: FieldError[]) => ({
    type: `https://backline.dev/errors/${code}`,
    title: TITLES[status] ?? "Error",
    status,
    code,
    detail,
    ...(param ? { param } : {}),
    ...(errors ? { errors } : {}),
    request_id: String(request.id),
  });
  if (error instanceof ApiError) {
    return {
      status: error.status,
      headers: error.headers,
      body: base(error.status, error.code, error.message, error.param, error.errors),
    };
  }
  const db = asDbError(error);
  if (db) {
    const mapped = mapDbError(db);
    // This API sends only its own SQL: an undefined column or a syntax error (class 42) is a bug, not the caller's.
    const ours = db.sqlstate.startsWith("42") && db.sqlstate !== "42501";
    if (db.sqlstate === "BL014") {
      // The database refused what the key's scopes do not cover (migration 0013): its detail
      // names the scope, and the field at fault where there is one.
      const { scope, param } = scopeDetail(db.detail);
      return {
        status: 403,
        headers: {
          "WWW-Authenticate": `Bearer realm="backline", error="insufficient_scope"${scope ? `, scope="${scope}"` : ""}`,
        },
        body: base(403, "insufficient_scope", db.message, param),
      };
    }
    if ((mapped.status < 500 || mapped.status === 503) && !ours) {
      const code = DB_CODES[mapped.code] ?? mapped.code;
      return { status: mapped.status, headers: {}, body: base(mapped.status, code, db.message, db.column) };
    }
    if (mapped.code === "statement_timeout") {
      request.log.warn({ sqlstate: db.sqlstate }, "statement cancelled (statement timeout)");
      return { status: 504, headers: {}, body: base(504, mapped.code, TIMEOUT_DETAIL) };
    }
    request.log.error({ err: error }, "database error");
    const status = ours ? 500 : mapped.status;
    return {
      status,
      headers: {},
      body: base(
        status,
        ours ? "internal_error" : mapped.code,
        "The database could not complete the request.",
      ),
    };
  }
  const e = error as { statusCode?: unknown; code?: unknown; message?: unknown };
  if (typeof e?.statusCode === "number" && e.statusCode >= 400 && e.statusCode < 500) {
    // Fastify's own client errors: malformed JSON, body too large, unsupported media type.
    const code =
      e.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE"
        ? "unsupported_media_type"
        : e.code === "FST_ERR_CTP_BODY_TOO_LARGE"
          ? "body_too_large"
          : error instanceof JsonLimitError
            ? error.code
            : e.statusCode === 400
              ? "invalid_json"
              : "bad_request";
    return { status: e.statusCode, headers: {}, body: base(e.statusCode, code, String(e.message)) };
  }
  request.log.error({ err: error }, "unhandled error");
  return { status: 500, headers: {}, body: base(500, "internal_error", "An unexpected error occurred.") };
}
