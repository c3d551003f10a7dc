import type { z } from "zod";

/**
 * Zod's issues as field errors, the shape every JSON interface of Backline answers with (the
 * public API, the admin API): every failing field, its path as `tracks[0].isrc`, and a code a
 * program can switch on (required, unknown_field, invalid_type, out_of_range, invalid_choice,
 * invalid_format, invalid_value, or a check's own code).
 */
export interface FieldError {
  param: string;
  code: string;
  message: string;
}

/** `tracks[0].isrc` from a zod path. */
export function paramOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = input;
  for (const part of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[part];
  }
  return v;
}

/** Zod's issues as field errors: every failing field, with a code a program can switch on. */
export function fieldErrors(error: z.ZodError, input: unknown): FieldError[] {
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
    if (
      (issue.code === "invalid_type" || issue.code === "invalid_union") &&
      valueAt(input, issue.path) === undefined
    ) {
      out.push({ param, code: "required", message: `${param} is required` });
      continue;
    }
    const custom =
      issue.code === "custom" ? (issue.params as { code?: string } | undefined)?.code : undefined;
    const code = custom
      ? custom
      : issue.code === "invalid_type"
        ? "invalid_type"
        : issue.code === "too_small" || issue.code === "too_big"
          ? "out_of_range"
          : issue.code === "invalid_value"
            ? "invalid_choice"
            : issue.code === "invalid_format"
              ? "invalid_format"
              : "invalid_value";
    out.push({ param, code, message: `${param}: ${issue.message}` });
  }
  return out;
}
