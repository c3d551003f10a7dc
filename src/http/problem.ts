import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { asDbError, mapDbError } from "../db/errors.ts";

/**
 * Errors of Backline's own endpoints (health, admin, and the default for anything without a
 * surface of its own) as RFC 9457 problem details with a machine-readable `code` and the
 * `request_id`. The table, auth and public APIs shape their bodies as their contracts say, from
 * the same codes.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  param?: string;
  /** Every failing field, when there are several (a refused body, a release that fails its checks). */
  errors?: { param: string; code: string; message: string }[];
  request_id: string;
}

export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | undefined;

  constructor(status: number, code: string, message: string, param?: string) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

/** HTTP status titles for problem documents (every surface that answers RFC 9457 uses these). */
export const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  409: "Conflict",
  412: "Precondition Failed",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export function sendProblem(
  reply: FastifyReply,
  request: FastifyRequest,
  p: {
    status: number;
    code: string;
    detail: string;
    param?: string | undefined;
    errors?: Problem["errors"] | undefined;
  },
): FastifyReply {
  const body: Problem = {
    type: `https://backline.dev/errors/${p.code}`,
    title: TITLES[p.status] ?? "Error",
    status: p.status,
    detail: p.detail,
    code: p.code,
    ...(p.param ? { param: p.param } : {}),
    ...(p.errors ? { errors: p.errors } : {}),
    request_id: String(request.id),
  };
  return reply.status(p.status).type("application/problem+json").send(body);
}

/** The default error handler: known errors keep their status and code; anything else is a logged 500 without internals. */
export function problemErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof HttpError) {
    return sendProblem(reply, request, {
      status: error.status,
      code: error.code,
      detail: error.message,
      param: error.param,
    });
  }
  if (error.validation) {
    const first = error.validation[0];
    const param = first?.instancePath?.replace(/^\//, "").replace(/\//g, ".") || undefined;
    return sendProblem(reply, request, {
      status: 400,
      code: "invalid_request",
      detail: error.message,
      param,
    });
  }
  const db = asDbError(error);
  if (db) {
    const mapped = mapDbError(db);
    if (mapped.status < 500 || mapped.status === 503) {
      return sendProblem(reply, request, { ...mapped, detail: db.message, param: db.column });
    }
    if (mapped.code === "statement_timeout") {
      request.log.warn({ sqlstate: db.sqlstate }, "statement cancelled (statement timeout)");
      return sendProblem(reply, request, {
        ...mapped,
        detail: "The request ran longer than its statement timeout and was cancelled.",
      });
    }
    request.log.error({ err: error }, "database error");
    return sendProblem(reply, request, {
      status: mapped.status,
      code: mapped.code,
      detail: "The database could not complete the request.",
    });
  }
  // Fastify's own client errors (bad JSON, body too large, unsupported media type) carry a 4xx status.
  if (typeof error.statusCode === "number" && error.statusCode >= 400 && error.statusCode < 500) {
    const code = (error.code ?? "bad_request").replace(/^FST_ERR_CTP_/, "").toLowerCase();
    return sendProblem(reply, request, { status: error.statusCode, code, detail: error.message });
  }
  request.log.error({ err: error }, "unhandled error");
  return sendProblem(reply, request, {
    status: 500,
    code: "internal_error",
    detail: "An unexpected error occurred.",
  });
}
