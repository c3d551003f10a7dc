import { z } from "zod";
import { type Catalogue, CONTRIBUTOR_ROLES, RELEASE_TYPES, WORLDWIDE } from "../../catalog/catalogue.ts";
import { gtinIsValid, normaliseIsrc } from "../../catalog/identifiers.ts";
import { Timestamp } from "../../http/formats.ts";
import { sum } from "../../money/decimal.ts";
import type { FieldError } from "../errors.ts";
import { Id } from "../route.ts";

/**
 * The public API's representations of the catalog (the same rows as /rest/v1's tables) and the
 * checks that need the validation catalogues. Field names follow seed 001 and the tables.
 */

const DateOnly = z.iso.date().meta({ description: "A date, YYYY-MM-DD." });
const Year = z.number().int().min(1900).max(2200);
const Language = z
  .string()
  .regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/)
  .meta({ description: "BCP 47 language tag, e.g. en or pt-BR." });
const Territory = z
  .string()
  .regex(/^[A-Z]{2}$/)
  .meta({ description: "ISO 3166-1 alpha-2 code (GET /rules)." });

export const ReleaseStatus = z
  .enum([
    "draft",
    "pending",
    "submitted",
    "in_review",
    "approved",
    "rejected",
    "delivering",
    "delivered",
    "live",
    "takedown_requested",
    "taken_down",
  ])
  .meta({ id: "ReleaseStatus", description: "The release's lifecycle status (docs/releases.md)." });

const releaseFields = {
  title: z.string().trim().min(1).max(500),
  version: z.string().max(200).nullable().meta({ description: "e.g. Deluxe Edition, Remastered 2024." }),
  release_type: z.enum(RELEASE_TYPES),
  artist_name: z.string().trim().min(1).max(500).meta({ description: "The display artist." }),
  primary_genre: z.string().max(100).meta({ description: "A genre code from GET /rules." }),
  secondary_genre: z.string().max(100).nullable(),
  genres: z.array(z.string().max(100)).max(10),
  release_date: DateOnly,
  original_release_date: DateOnly.nullable(),
  upc: z
    .string()
    .regex(/^[0-9]{12,14}$/)
    // The pattern reports a malformed code; this only a wrong check digit, so one error per field.
    .refine((v) => !/^[0-9]{12,14}$/.test(v) || gtinIsValid(v), "the check digit is wrong")
    .nullable()
    .meta({ description: "UPC-A or EAN-13 with its check digit; assigned by the operator when left out." }),
  label_name: z.string().max(300).nullable(),
  catalog_number: z.string().max(100).nullable(),
  licensed_territories_include: z
    .string()
    .regex(/^(WW|[A-Z]{2}(,[A-Z]{2})*)$/)
    .meta({
      description: "Where the release is sold: WW (worldwide) or a comma-separated list of ISO codes.",
    }),
  territories: z.array(Territory).max(260).meta({ description: "Further territories, ISO codes." }),
  territories_exclude: z.array(Territory).max(260).meta({ description: "Territories left out, e.g. of WW." }),
  services: z
    .array(z.string().max(60))
    .max(100)
    .meta({ description: "Store codes from GET /rules; empty means every store." }),
  copyright: z
    .string()
    .max(500)
    .nullable()
    .meta({ description: "The (C) line, e.g. 2026 Night Owl Records." }),
  copyright_year: Year.nullable(),
  phonographic_copyright: z.string().max(500).nullable().meta({ description: "The (P) line." }),
  phonographic_year: Year.nullable(),
  explicit: z.boolean(),
  language: Language.nullable(),
};

/** Create: seed 001's fields (title, release_type, artist_name, ...), status draft or pending. */
export const ReleaseCreate = z
  .object({
    ...Object.fromEntries(Object.entries(releaseFields).map(([k, v]) => [k, v.optional()])),
    title: releaseFields.title,
    artist_id: Id.optional().meta({
      description: "The artist profile; when left out, artist_name names (or creates) one.",
    }),
    status: z.enum(["draft", "pending"]).default("draft"),
  })
  .strict()
  .meta({
    id: "ReleaseCreate",
    description:
      "artist_name or artist_id is required (checked with the other fields, see checkReleaseCreate).",
  }) as unknown as z.ZodType<ReleaseInput & { status: "draft" | "pending" }>;

export const ReleaseUpdate = z
  .object({
    ...Object.fromEntries(Object.entries(releaseFields).map(([k, v]) => [k, v.optional()])),
    artist_id: Id.optional(),
    status: z
      .enum(["draft", "pending"])
      .optional()
      .meta({ description: "Submit with POST /releases/{id}/submit." }),
  })
  .strict()
  .meta({ id: "ReleaseUpdate" }) as unknown as z.ZodType<ReleaseInput & { status?: "draft" | "pending" }>;

/** What a delivered release may still change: its display metadata (an update delivery follows). */
export const METADATA_FIELDS = [
  "title",
  "version",
  "artist_name",
  "primary_genre",
  "secondary_genre",
  "genres",
  "label_name",
  "copyright",
  "copyright_year",
  "phonographic_copyright",
  "phonographic_year",
  "explicit",
  "language",
  "original_release_date",
] as const;

export const ReleaseMetadataUpdate = z
  .object(Object.fromEntries(METADATA_FIELDS.map((k) => [k, releaseFields[k].optional()])))
  .strict()
  .meta({ id: "ReleaseMetadataUpdate" }) as unknown as z.ZodType<Partial<ReleaseInput>>;

export type ReleaseInput = {
  title?: string;
  artist_id?: string;
  artist_name?: string;
} & Record<string, unknown>;

export const RELEASE_COLUMNS = [
  "id",
  "account_id",
  "artist_id",
  ...Object.keys(releaseFields),
  "status",
  "status_reason",
  "submitted_at",
  "created_at",
  "updated_at",
] as const;

const releaseOut = {
  id: Id,
  object: z.literal("release"),
  account_id: Id,
  artist_id: Id,
  title: z.string(),
  version: z.string().nullable(),
  release_type: z.enum(RELEASE_TYPES),
  artist_name: z.string().nullable(),
  primary_genre: z.string().nullable(),
  secondary_genre: z.string().nullable(),
  genres: z.array(z.string()),
  release_date: DateOnly.nullable(),
  original_release_date: DateOnly.nullable(),
  upc: z.string().nullable(),
  label_name: z.string().nullable(),
  catalog_number: z.string().nullable(),
  licensed_territories_include: z.string().nullable(),
  territories: z.array(z.string()),
  territories_exclude: z.array(z.string()),
  services: z.array(z.string()),
  copyright: z.string().nullable(),
  copyright_year: z.number().int().nullable(),
  phonographic_copyright: z.string().nullable(),
  phonographic_year: z.number().int().nullable(),
  explicit: z.boolean(),
  language: z.string().nullable(),
  status: ReleaseStatus,
  status_reason: z
    .string()
    .nullable()
    .meta({ description: "Why it has its status: a rejection reason, a takedown reason." }),
  submitted_at: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
};
export const Release = z.object(releaseOut).meta({ id: "Release" });

export const Contributor = z
  .object({
    name: z.string().trim().min(1).max(300),
    role: z.enum(CONTRIBUTOR_ROLES),
    artist_id: Id.optional().meta({ description: "The artist profile, when the contributor has one." }),
  })
  .strict()
  .meta({ id: "Contributor" });

export const Split = z
  .object({
    name: z.string().trim().min(1).max(300),
    share: z
      .union([
        z
          .number()
          .gt(0)
          .max(100)
          .refine((n) => /^\d{1,3}(\.\d{1,4})?$/.test(String(n)), "at most four decimals"),
        z
          .string()
          .regex(/^\d{1,3}(\.\d{1,4})?$/, "a percentage as a decimal string, at most four decimals")
          .refine((v) => Number(v) > 0 && Number(v) <= 100, "more than 0 and at most 100"),
      ])
      // Stored as the number written: a share has at most seven significant digits, which a
      // JSON number carries exactly (its shortest form is the decimal written), so "33.3334" and
      // 33.3334 are the same share to the last digit (docs/payouts.md, "Splits").
      .transform((v) => (typeof v === "string" ? Number(v) : v))
      .meta({
        description:
          'Percent, a number or a decimal string with up to four decimals ("33.3334"); the shares of a track total exactly 100. Read exactly, never rounded.',
      }),
    email: z.email().optional().meta({
      description:
        'Who is paid this share (docs/payouts.md, "Payees"): held for them until they sign up with this address. Without one, the share is the account\'s own.',
    }),
    role: z.string().max(100).optional(),
  })
  .strict()
  .meta({ id: "Split" });

const trackFields = {
  title: z.string().trim().min(1).max(500),
  version: z.string().max(200).nullable(),
  isrc: z
    .string()
    .max(20)
    .refine(
      (v) => normaliseIsrc(v) !== undefined,
      "an ISRC is CC-XXX-YY-NNNNN (12 characters without hyphens)",
    )
    .nullable()
    .meta({
      description: "CC-XXX-YY-NNNNN; hyphens and case are normalised. One recording per ISRC in the account.",
    }),
  track_number: z.number().int().min(1).max(999),
  disc_number: z.number().int().min(1).max(99),
  duration: z.number().int().min(1).max(86400).nullable().meta({ description: "Seconds." }),
  artist_name: z.string().max(500).nullable(),
  explicit: z.boolean(),
  language: Language.nullable(),
  contributors: z.array(Contributor).max(50),
  splits: z.array(Split).max(50),
};

export const TrackCreate = z
  .object({
    ...Object.fromEntries(Object.entries(trackFields).map(([k, v]) => [k, v.optional()])),
    title: trackFields.title,
  })
  .strict()
  .meta({
    id: "TrackCreate",
    description: "The shares of `splits` total exactly 100.",
  }) as unknown as z.ZodType<TrackInput>;

export const TrackUpdate = z
  .object(Object.fromEntries(Object.entries(trackFields).map(([k, v]) => [k, v.optional()])))
  .strict()
  .meta({
    id: "TrackUpdate",
    description: "The shares of `splits` total exactly 100.",
  }) as unknown as z.ZodType<TrackInput>;

/**
 * Checks across fields run beside the schema (not as zod refinements, which zod skips while any
 * field fails), so that one answer lists every failing field.
 */
export function checkTrack(body: unknown): FieldError[] {
  const splits = (body as Record<string, unknown> | null)?.splits;
  if (!Array.isArray(splits) || splits.length === 0) return [];
  const shares = splits.map((s) => (s as { share?: unknown } | null)?.share);
  const written = shares.map((x) => (typeof x === "number" && Number.isFinite(x) ? String(x) : x));
  if (!written.every((x) => typeof x === "string" && /^\d{1,3}(\.\d{1,4})?$/.test(x))) return [];
  // Exact decimal arithmetic: 33.3334 + 33.3333 + 33.3333 is 100, never 99.99999999999999.
  const total = sum(written as string[]);
  return total === "100"
    ? []
    : [
        {
          param: "splits",
          code: "splits_total",
          message: `the shares of the splits total ${total}, not exactly 100`,
        },
      ];
}

/** Create: the catalogue codes, and an artist named one way or the other. */
export function checkReleaseCreate(body: unknown, catalogue: Catalogue): FieldError[] {
  const b = (body ?? {}) as Record<string, unknown>;
  const errors = checkReleaseCodes(body, catalogue);
  if (b.artist_id === undefined && b.artist_name === undefined) {
    errors.push({
      param: "artist_name",
      code: "required",
      message: "artist_name (or artist_id) is required",
    });
  }
  return errors;
}

export type TrackInput = { isrc?: string | null; splits?: { share: number | string }[] } & Record<
  string,
  unknown
>;

export const TRACK_COLUMNS = [
  "id",
  "release_id",
  "account_id",
  ...Object.keys(trackFields),
  "audio_metadata",
  "created_at",
  "updated_at",
] as const;

export const Track = z
  .object({
    id: Id,
    object: z.literal("track"),
    release_id: Id,
    account_id: Id,
    title: z.string(),
    version: z.string().nullable(),
    isrc: z.string().nullable(),
    track_number: z.number().int().nullable(),
    disc_number: z.number().int(),
    duration: z.number().int().nullable(),
    artist_name: z.string().nullable(),
    explicit: z.boolean(),
    language: z.string().nullable(),
    contributors: z.array(Contributor),
    splits: z.array(Split),
    audio_metadata: z.record(z.string(), z.unknown()).meta({
      description: "What validation of the uploaded audio measured (codec, sample rate, ...); read-only.",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Track" });

const artistFields = {
  name: z.string().trim().min(1).max(300),
  bio: z.string().max(10000).nullable(),
  store_ids: z
    .record(z.string().regex(/^[a-z0-9_]+$/), z.string().min(1).max(200))
    .meta({ description: 'The artist\'s id per store code, e.g. {"spotify": "4Z8W4fKeB5YxbusRsdQVPb"}.' }),
  platform_links: z
    .record(z.string().regex(/^[a-z0-9_]+$/), z.url({ protocol: /^https$/ }).max(500))
    .meta({ description: 'Links to the artist\'s pages, e.g. {"website": "https://..."}.' }),
  localized_names: z
    .record(z.string().regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/), z.string().min(1).max(300))
    .meta({ description: "The name in other languages or scripts, by BCP 47 tag." }),
};

export const ArtistCreate = z
  .object({
    ...Object.fromEntries(Object.entries(artistFields).map(([k, v]) => [k, v.optional()])),
    name: artistFields.name,
  })
  .strict()
  .meta({ id: "ArtistCreate" }) as unknown as z.ZodType<Record<string, unknown> & { name: string }>;

export const ArtistUpdate = z
  .object(Object.fromEntries(Object.entries(artistFields).map(([k, v]) => [k, v.optional()])))
  .strict()
  .meta({ id: "ArtistUpdate" }) as unknown as z.ZodType<Record<string, unknown>>;

export const ARTIST_COLUMNS = [
  "id",
  "account_id",
  ...Object.keys(artistFields),
  "created_at",
  "updated_at",
] as const;

export const Artist = z
  .object({
    id: Id,
    object: z.literal("artist"),
    account_id: Id,
    name: z.string(),
    bio: z.string().nullable(),
    store_ids: z.record(z.string(), z.string()),
    platform_links: z.record(z.string(), z.string()),
    localized_names: z.record(z.string(), z.string()),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Artist" });

/** Territory, store and genre codes against the catalogues: every bad value named. */
export function checkReleaseCodes(body: unknown, catalogue: Catalogue): FieldError[] {
  const b = (body ?? {}) as Record<string, unknown>;
  const errors: FieldError[] = [];
  const territory = (param: string, code: unknown) => {
    if (typeof code === "string" && /^[A-Z]{2}$/.test(code) && !catalogue.territoryCodes.has(code)) {
      errors.push({
        param,
        code: "invalid_territory",
        message: `${code} is not an ISO 3166-1 alpha-2 territory`,
      });
    }
  };
  if (typeof b.licensed_territories_include === "string" && b.licensed_territories_include !== WORLDWIDE) {
    for (const code of b.licensed_territories_include.split(","))
      territory("licensed_territories_include", code);
  }
  for (const field of ["territories", "territories_exclude"]) {
    const list = b[field];
    if (Array.isArray(list)) {
      for (const [i, code] of list.entries()) territory(`${field}[${i}]`, code);
    }
  }
  if (Array.isArray(b.services)) {
    b.services.forEach((code, i) => {
      if (typeof code === "string" && !catalogue.storeCodes.has(code)) {
        errors.push({
          param: `services[${i}]`,
          code: "invalid_service",
          message: `${code} is not a store code (GET /rules)`,
        });
      }
    });
  }
  const genre = (param: string, code: unknown) => {
    if (typeof code === "string" && !catalogue.genreCodes.has(code)) {
      errors.push({ param, code: "invalid_genre", message: `${code} is not a genre code (GET /rules)` });
    }
  };
  genre("primary_genre", b.primary_genre);
  if (b.secondary_genre !== null) genre("secondary_genre", b.secondary_genre);
  if (Array.isArray(b.genres)) {
    for (const [i, code] of b.genres.entries()) genre(`genres[${i}]`, code);
  }
  return errors;
}

export function checkArtistCodes(body: unknown, catalogue: Catalogue): FieldError[] {
  const ids = (body as Record<string, unknown> | null)?.store_ids;
  if (!ids || typeof ids !== "object" || Array.isArray(ids)) return [];
  return Object.keys(ids)
    .filter((code) => !catalogue.storeCodes.has(code))
    .map((code) => ({
      param: `store_ids.${code}`,
      code: "invalid_service",
      message: `${code} is not a store code (GET /rules)`,
    }));
}
