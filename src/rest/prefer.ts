import { RestError } from "./sql-common.ts";

/**
 * The Prefer header (RFC 7240) as PostgREST reads it: several preferences in one header or
 * several headers. Unknown preferences are ignored, unless handling=strict asks for an error.
 * What was honoured is echoed in Preference-Applied.
 */
export interface Preferences {
  return: "minimal" | "headers-only" | "representation" | undefined;
  count: "exact" | "planned" | "estimated" | undefined;
  resolution: "merge-duplicates" | "ignore-duplicates" | undefined;
  missing: "default" | "null" | undefined;
  tx: "commit" | "rollback" | undefined;
  handling: "strict" | "lenient" | undefined;
  maxAffected: number | undefined;
  /**
   * `params=single-object` (PostgREST up to v12; v13 dropped it): an rpc POST's whole body is the
   * one json/jsonb argument of the function, whatever its name.
   */
  params: "single-object" | undefined;
  /** The preferences honoured, as they go into Preference-Applied. */
  applied: string[];
}

const VALUES: Record<string, readonly string[]> = {
  return: ["minimal", "headers-only", "representation"],
  count: ["exact", "planned", "estimated"],
  resolution: ["merge-duplicates", "ignore-duplicates"],
  missing: ["default", "null"],
  tx: ["commit", "rollback"],
  handling: ["strict", "lenient"],
  params: ["single-object"],
};

export function parsePrefer(header: string | string[] | undefined): Preferences {
  const prefs: Preferences = {
    return: undefined,
    count: undefined,
    resolution: undefined,
    missing: undefined,
    tx: undefined,
    handling: undefined,
    maxAffected: undefined,
    params: undefined,
    applied: [],
  };
  const raw = (Array.isArray(header) ? header.join(",") : (header ?? ""))
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const unknown: string[] = [];
  for (const pref of raw) {
    const eq = pref.indexOf("=");
    const key = (eq < 0 ? pref : pref.slice(0, eq)).trim().toLowerCase();
    const value =
      eq < 0
        ? ""
        : pref
            .slice(eq + 1)
            .trim()
            .replace(/^"|"$/g, "");
    if (key === "max-affected") {
      const n = Number(value);
      if (Number.isInteger(n) && n >= 0) {
        prefs.maxAffected = n;
        continue;
      }
    } else {
      const allowed = VALUES[key];
      if (allowed?.includes(value)) {
        (prefs as unknown as Record<string, string>)[key] = value;
        continue;
      }
    }
    unknown.push(pref);
  }
  if (prefs.handling === "strict" && unknown.length > 0) {
    throw new RestError(
      400,
      "PGRST122",
      "Invalid preferences given with handling=strict",
      `Invalid preferences: ${unknown.join(", ")}`,
    );
  }
  return prefs;
}

/** Records a preference as honoured. */
export function apply(prefs: Preferences, name: string, value: string | number): void {
  prefs.applied.push(`${name}=${value}`);
}
