import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
/**
 * The admin API's errors: RFC 9457 problem details (src/http/problem.ts) with a `code`, the
 * `param` at fault and the `request_id`; a refused body and a release that fails its checks also
 * list every failing field in `errors`. An OperatorError of the pipeline keeps its code, with the
 * status OPERATOR_ERROR_STATUS gives it.
 */
import { asDbError } from "../db/errors.ts";
import type { FieldError } from "../http/field-errors.ts";
import { HttpError, problemErrorHandler, sendProblem } from "../http/problem.ts";
import { OPERATOR_ERROR_STATUS, OperatorError } from "../pipeline/errors.ts";

/** An HttpError that lists the failing fields. */
export class FieldsError extends HttpError {
  readonly errors: FieldError[];

  constructor(status: number, code: string, message: string, errors: FieldError[]) {
    super(status, code, message, errors[0]?.param);
    this.errors = errors;
  }
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The body field a pipeline's reason_required refusal is about (`reason`, `message`). */
    reasonParam?: string;
  }
}

export function adminErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof FieldsError) {
    return sendProblem(reply, request, {
      status: error.status,
      code: error.code,
      detail: error.message,
      param: error.param,
      errors: error.errors,
    });
  }
  if (error instanceof OperatorError) {
    const status = OPERATOR_ERROR_STATUS[error.code];
    if (error.code === "release_incomplete") {
      return sendProblem(reply, request, {
        status,
        code: error.code,
        detail: error.message,
        param: error.problems[0]?.param,
        errors: error.problems.map((p) => ({ param: p.param, code: p.code, message: p.message })),
      });
    }
    return sendProblem(reply, request, {
      status,
      code: error.code,
      detail: error.message,
      param: error.code === "reason_required" ? request.routeOptions.config.reasonParam : undefined,
    });
  }
  // The database's own staff check (internal.require_staff, migration 0019) names its refusal in
  // the hint: the same 403 the auth hook gives, when a role was removed between the two.
  const db = asDbError(error);
  if (db?.sqlstate === "42501" && (db.hint === "not_staff" || db.hint === "insufficient_role")) {
    return sendProblem(reply, request, { status: 403, code: db.hint, detail: db.message });
  }
  return problemErrorHandler(error, request, reply);
}
