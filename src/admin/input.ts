import { z } from "zod";
import { fieldErrors } from "../http/field-errors.ts";
import { HttpError } from "../http/problem.ts";
import { FieldsError } from "./errors.ts";

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
    // A takedown the store confirmed, recorded by hand: who confirmed it, and how.
    z.strictObject({ status: z.literal("taken_down"), note: z.string().trim().min(1).max(2000) }),
  ]),
  void: z.strictObject({ reason: z.string().trim().min(1).max(2000) }),
};

const ID = z.guid();

/** The `id` path parameter, or 404 not_found naming `what`. */
export function pathId(params: unknown, what: string): string {
  const id = (params as { id?: unknown } | undefined)?.id;
  const r = ID.safeParse(id);
  if (!r.success) throw new HttpError(404, "not_found", `no ${what} ${String(id)}`, "id");
  return r.data.toLowerCase();
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
