/**
 * How an endpoint that is going away says so on every answer (docs/public-api.md, "Versioning"):
 * `Deprecation` (RFC 9745: the date it was deprecated, as `@<unix seconds>`), `Sunset` (RFC 8594:
 * the HTTP date after which it may stop answering) and a `Link` to what replaces it and to the
 * changelog entry. A route spec's `deprecated` sets them, and marks the operation deprecated in the
 * OpenAPI document.
 */
export interface Deprecation {
  /** When it was deprecated (ISO date, UTC). */
  since: string;
  /** The earliest day it may stop answering (ISO date, UTC): at least twelve months after `since`. */
  sunset: string;
  /** The replacement (an absolute path of this or a later version), when there is one. */
  successor?: string;
  /** The changelog entry that announced it. */
  changelog: string;
}

const MIN_NOTICE_DAYS = 365;

export function deprecationHeaders(d: Deprecation): Record<string, string> {
  const since = Date.parse(`${d.since}T00:00:00Z`);
  const sunset = Date.parse(`${d.sunset}T00:00:00Z`);
  if (!Number.isFinite(since) || !Number.isFinite(sunset))
    throw new Error(`deprecation dates ${d.since} ${d.sunset}`);
  if (sunset - since < MIN_NOTICE_DAYS * 86_400_000) {
    throw new Error(
      `a sunset less than ${MIN_NOTICE_DAYS} days after the deprecation (${d.since} -> ${d.sunset})`,
    );
  }
  const links = [`<${d.changelog}>; rel="deprecation"; type="text/html"`];
  if (d.successor) links.push(`<${d.successor}>; rel="successor-version"`);
  return {
    Deprecation: `@${Math.floor(since / 1000)}`,
    Sunset: new Date(sunset).toUTCString(),
    Link: links.join(", "),
  };
}
