import type { components } from "./generated/openapi.ts";

/** The API's error answer: RFC 9457 problem details with Backline's members (docs/public-api.md, "Errors"). */
export type Problem = components["schemas"]["Problem"];

/** One failing field of a `validation_failed` (or `release_incomplete`, …) answer. */
export interface FieldError {
  /** The field at fault, as a path: `title`, `territories[0]`, `tracks[0].isrc`, or a header or query parameter. */
  param: string;
  /** Machine-readable: `required`, `invalid_territory`, `splits_total`, … */
  code: string;
  message: string;
}

/** An error answer of the API, thrown by `unwrap()`. */
export class BacklineApiError extends Error {
  override readonly name = "BacklineApiError";
  readonly status: number;
  /** The problem's `code` (`validation_failed`, `resource_missing`, …); `http_<status>` when the answer was no problem document. */
  readonly code: string;
  readonly detail: string;
  /** The field or parameter at fault, when one is. */
  readonly param: string | undefined;
  /** Every failing field (validation errors); empty otherwise. */
  readonly errors: FieldError[];
  /** The request's id (`X-Request-Id`): quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** The problem document as the server sent it, when it sent one. */
  readonly problem: Problem | undefined;
  readonly response: Response;

  constructor(response: Response, body: unknown) {
    const problem = isProblem(body) ? body : undefined;
    const detail =
      problem?.detail ?? (typeof body === "string" && body ? body.slice(0, 500) : response.statusText);
    const code = problem?.code ?? `http_${response.status}`;
    super(`${response.status} ${code}: ${detail}`);
    this.status = response.status;
    this.code = code;
    this.detail = detail;
    this.param = problem?.param;
    this.errors = problem?.errors ?? [];
    this.requestId = problem?.request_id ?? response.headers.get("x-request-id") ?? undefined;
    this.problem = problem;
    this.response = response;
  }

  /** The error of one field (`err.field("title")?.code`). */
  field(param: string): FieldError | undefined {
    return this.errors.find((e) => e.param === param);
  }
}

function isProblem(body: unknown): body is Problem {
  return (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { code?: unknown }).code === "string" &&
    typeof (body as { status?: unknown }).status === "number"
  );
}

/** What openapi-fetch answers: the data, or the error with the response. */
export interface Result {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/** The data of a successful answer. */
export type DataOf<R extends Result> = Exclude<Extract<R, { error?: never }>["data"], undefined>;

/**
 * The data of an answer, or a `BacklineApiError` thrown for an error answer:
 * `const release = await unwrap(api.POST("/releases", { body }))`.
 */
export async function unwrap<R extends Result>(result: R | Promise<R>): Promise<DataOf<R>> {
  const r = await result;
  if (!r.response.ok) throw new BacklineApiError(r.response, r.error);
  return r.data as DataOf<R>;
}
