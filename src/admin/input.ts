import { z } from "zod";
import { HttpError } from "../http/problem.ts";
import { type FieldError, FieldsError } from "./errors.ts";

/**
 * What the admin API accepts: ids in the path (anything but a UUID names nothing: 404, as a
 * missing id or another tenant's does) and strict JSON bodies (an unknown field is refused, not
 * ignored: a typo must not pass for a decision).
 */

const REASON = z.string().min(1).max(2000);

export const Bodies = {
  /** Approving a release, retrying deliveries: nothing to say (the body may be left out). */
  empty: z.strictObject({}),
  reject: z.strictObject({ reason: REASON }),
  oacApprove: z.strictObject({ note: z.string().max(2000).optional() }),
  report: z.discriminatedUnion("status", [
    z.strictObject({ status: z.literal("live") }),
    z.strictObject({ status: z.literal("error"), message: REASON }),
  ]),
};

const ID = z.guid();

/** The `id` path parameter, or 404 not_found naming `what`. */
export function pathId(params: unknown, what: string): string {
  const id = (params as { id?: unknown } | undefined)?.id;
  const r = ID.safeParse(id);
  if (!r.success) throw new HttpError(404, "not_found", `no ${what} ${String(id)}`, "id");
  return r.data.toLowerCase();
}

function paramOf(path: readonly PropertyKey[]): string {
  return path.map(String).join(".");
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = input;
  for (const part of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[part];
  }
  return v;
}

function fieldErrors(error: z.ZodError, input: unknown): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        const param = paramOf([...issue.path, key]);
        out.push({ param, code: "unknown_field", message: `${param} is not a field of this request` });
      }
      continue;
    }
    const param = paramOf(issue.path) || "body";
    if (issue.path.length > 0 && valueAt(input, issue.path) === undefined) {
      out.push({ param, code: "required", message: `${param} is required` });
      continue;
    }
    const code =
      issue.code === "too_small" || issue.code === "too_big"
        ? "out_of_range"
        : issue.code === "invalid_type"
          ? "invalid_type"
          : "invalid_value";
    out.push({ param, code, message: `${param}: ${issue.message}` });
  }
  return out;
}

/** A JSON body as `schema` wants it, or 400 invalid_request listing every failing field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown, options: { optional?: boolean } = {}): T {
  const input = body === undefined && options.optional ? {} : body;
  if (input === undefined || input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new HttpError(
      400,
      "invalid_request",
      "Send a JSON object as the request body (Content-Type: application/json).",
    );
  }
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const errors = fieldErrors(r.error, input);
  throw new FieldsError(
    400,
    "invalid_request",
    errors.length === 1
      ? (errors[0]?.message ?? "Invalid request body.")
      : `${errors.length} fields are invalid.`,
    errors,
  );
}
