import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { ApiError } from "./errors.ts";

/**
 * Entity tags of releases, tracks and artists (docs/public-api.md, "Concurrent edits"). A tag is
 * strong and made of two parts: the row's version (its `updated_at` in microseconds, which every
 * write moves) and a digest of the representation served. `If-None-Match` compares the whole tag
 * (so a release's tag also changes when one of its tracks does); `If-Match` on a write compares the
 * row version inside the UPDATE or DELETE statement itself, so a stale tag changes nothing even
 * when two writers race.
 */

/** The row's version as text: select it beside a row's columns (`, ${VERSION_SQL}`). */
export const VERSION_SQL = `(extract(epoch from updated_at) * 1000000)::bigint::text as "row_version__"`;

/** The SQL condition "the row is at one of these versions" for bind parameter `$n` (a bigint[]). */
export const versionIn = (n: number): string =>
  `(extract(epoch from updated_at) * 1000000)::bigint = any ($${n}::bigint[])`;

/** A row read with VERSION_SQL, split into its version and its columns. */
export function splitVersion<T extends Record<string, unknown>>(row: T): { version: string; row: T } {
  const { row_version__, ...rest } = row as T & { row_version__?: unknown };
  return { version: String(row_version__ ?? ""), row: rest as unknown as T };
}

/**
 * A representation `body` of a row at `version`, turned into JSON once for both its strong ETag
 * and the answer: the body is answered as this text, never serialized a second time.
 */
export function tagged(version: string, body: unknown): { body: string; headers: { ETag: string } } {
  const json = JSON.stringify(body);
  const digest = createHash("sha256").update(json).digest("base64url").slice(0, 16);
  return { body: json, headers: { ETag: `"${version}-${digest}"` } };
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

/** The entity tags of a list header (`"a", W/"b"`), or "*" for any. */
function tagsOf(value: string): string[] | "*" {
  if (value.trim() === "*") return "*";
  return value.match(/(?:W\/)?"[^"]*"/g) ?? [];
}

/**
 * What `If-Match` asks of a write: undefined (no condition), "*" (the row must exist), or the row
 * versions it accepts. Strong comparison (RFC 9110, 13.1.1): weak tags and tags that are not ours
 * match nothing, so they answer 412.
 */
export function ifMatchOf(request: FastifyRequest): undefined | "*" | string[] {
  const value = header(request, "if-match");
  if (value === undefined) return undefined;
  const tags = tagsOf(value);
  if (tags === "*") return "*";
  const versions: string[] = [];
  for (const tag of tags) {
    const m = /^"(\d{1,19})-[A-Za-z0-9_-]+"$/.exec(tag);
    if (m?.[1]) versions.push(m[1]);
  }
  return versions;
}

/** The versions to bind for `versionIn`, or null when If-Match sets no version condition. */
export function versionsToMatch(ifMatch: undefined | "*" | string[]): string[] | null {
  return ifMatch === undefined || ifMatch === "*" ? null : ifMatch;
}

/** Whether the request's If-None-Match names `etag` (weak comparison, RFC 9110, 13.1.2). */
export function notModified(request: FastifyRequest, etag: string): boolean {
  const value = header(request, "if-none-match");
  if (value === undefined) return false;
  const tags = tagsOf(value);
  if (tags === "*") return true;
  const opaque = etag.replace(/^W\//, "");
  return tags.some((t) => t.replace(/^W\//, "") === opaque);
}

export const preconditionFailed = (what: string, id: string): ApiError =>
  new ApiError(
    412,
    "precondition_failed",
    `The ${what} ${id} has changed since the ETag you sent (If-Match): nothing was changed. ` +
      "GET it again, reapply your change and send its new ETag.",
    { param: "If-Match" },
  );

/** A GET's answer: 304 without a body when If-None-Match names the tag, else the body; the ETag either way. */
export function conditionalGet(
  request: FastifyRequest,
  version: string,
  body: unknown,
): { status?: number; body: unknown; headers: Record<string, string> } {
  const answer = tagged(version, body);
  if (notModified(request, answer.headers.ETag))
    return { status: 304, body: undefined, headers: answer.headers };
  return answer;
}
