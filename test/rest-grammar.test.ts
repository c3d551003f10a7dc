import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt, SignJWT } from "jose";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { getTenantSigningSecret } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * The /rest/v1 grammar as a table: each case is one raw HTTP request (method, path and query
 * string, headers, body) and what PostgREST v12 answers to it (status, rows in order or a body,
 * headers). One logged-in user of a tenant without e-mail confirmation seeds a small catalog
 * through /rest/v1 itself; the analytics rows come from the service path, as the operator's
 * imports would write them. Read cases come first, then the writes (which use rows of their own),
 * so every expected result is exact.
 */

const PASSWORD = "Correct-Horse-7";

// ---- the catalog -------------------------------------------------------------------------------

const uuid = (prefix: string, n: number) => `${prefix}-0000-4000-8000-${String(n).padStart(12, "0")}`;
const A1 = uuid("aaaaaaaa", 1);
const A2 = uuid("aaaaaaaa", 2);
const A3 = uuid("aaaaaaaa", 3);
const R1 = uuid("bbbbbbbb", 1);
const R2 = uuid("bbbbbbbb", 2);
const R3 = uuid("bbbbbbbb", 3);
const R4 = uuid("bbbbbbbb", 4);
const R5 = uuid("bbbbbbbb", 5);
const R6 = uuid("bbbbbbbb", 6);
const T1 = uuid("cccccccc", 1);
const T2 = uuid("cccccccc", 2);
const T3 = uuid("cccccccc", 3);
const T4 = uuid("cccccccc", 4);
const T5 = uuid("cccccccc", 5);
const T6 = uuid("cccccccc", 6);
/** Ids the write cases create. */
const W = (n: number) => uuid("ffffffff", n);

const NIGHT = "Night Owl";
const MORNING = "Morning Light";
const PAPER = "Paper Boats";
const QUIET = "Quiet Storm";
const SONGS = "Songs, Vol. 2";
const SAY = 'Say "Hi"';

/** A GTIN with its check digit, as internal.gtin_is_valid() wants it. */
function gtin(base: string): string {
  const sum = [...base].reverse().reduce((s, d, i) => s + Number(d) * (i % 2 === 0 ? 3 : 1), 0);
  return `${base}${(10 - (sum % 10)) % 10}`;
}
const UPC1 = gtin("00602445123");
const UPC3 = gtin("00602445124");
const UPC4 = gtin("00602445125");

const ANN = { name: "Ann Lee", role: "composer" };
const BO = { name: "Bo Diaz", role: "producer" };

const ARTISTS = [
  { id: A1, name: "Aurora Vale", store_ids: { deezer: "27", spotify: "4Z8W" } },
  { id: A2, name: "Basement Choir", store_ids: { deezer: "99" } },
  { id: A3, name: "Cobalt Drift", store_ids: {} },
];

const release = (
  id: string,
  artist_id: string,
  title: string,
  release_type: string,
  release_date: string | null,
  genres: string[],
  upc: string | null,
  explicit = false,
) => ({
  id,
  artist_id,
  title,
  release_type,
  release_date,
  genres,
  upc,
  primary_genre: genres[0] ?? null,
  explicit,
});

const RELEASES = [
  release(R1, A1, NIGHT, "album", "2024-01-15", ["electronic", "ambient"], UPC1),
  release(R2, A1, MORNING, "ep", "2023-06-01", ["pop", "electronic"], null),
  release(R3, A2, PAPER, "single", null, ["folk", "acoustic"], UPC3),
  release(R4, A2, QUIET, "album", "2025-03-10", ["jazz"], UPC4),
  release(R5, A2, SONGS, "compilation", "2022-11-20", [], null),
  release(R6, A1, SAY, "single", "2021-05-05", ["pop"], null, true),
];

const TRACKS = [
  {
    id: T1,
    release_id: R1,
    title: "Owl Intro",
    track_number: 1,
    duration: 60,
    isrc: "US-ABC-24-00001",
    contributors: [ANN, BO],
  },
  {
    id: T2,
    release_id: R1,
    title: "Midnight Run",
    track_number: 2,
    duration: 245,
    isrc: "USABC2400002",
    contributors: [BO],
  },
  {
    id: T3,
    release_id: R1,
    title: "Dawn Chorus",
    track_number: 3,
    duration: 310,
    isrc: null,
    contributors: [],
  },
  {
    id: T4,
    release_id: R2,
    title: "Sunrise",
    track_number: 1,
    duration: 200,
    isrc: "GBXYZ2300001",
    contributors: [{ name: "Cy Moss", role: "composer" }],
  },
  {
    id: T5,
    release_id: R3,
    title: "Paper Boats",
    track_number: 1,
    duration: 180,
    isrc: "GBXYZ2300002",
    contributors: [{ name: "Ann Lee", role: "lyricist" }],
  },
  { id: T6, release_id: R4, title: "Thunder", track_number: 1, duration: 400, isrc: null, contributors: [] },
];

/** The columns of releases in table order: what `select=*` returns. */
const RELEASE_COLUMNS = [
  "id",
  "account_id",
  "artist_id",
  "title",
  "version",
  "release_type",
  "artist_name",
  "primary_genre",
  "secondary_genre",
  "genres",
  "release_date",
  "original_release_date",
  "upc",
  "label_name",
  "catalog_number",
  "licensed_territories_include",
  "territories",
  "territories_exclude",
  "services",
  "copyright",
  "copyright_year",
  "phonographic_copyright",
  "phonographic_year",
  "explicit",
  "language",
  "status",
  "status_reason",
  "submitted_at",
  "created_by",
  "created_at",
  "updated_at",
];

/**
 * Seed 000's seven tables, media_assets (the uploads of docs/uploads.md, read-only), and the money
 * views a payee reads their own figures through (docs/payouts.md, "Who sees what").
 */
const EXPOSED_PATHS = [
  "/artist_profiles",
  "/media_assets",
  "/notifications",
  "/payee_balances",
  "/payees",
  "/payouts",
  "/release_analytics",
  "/releases",
  "/statements",
  "/takedown_requests",
  "/track_analytics",
  "/tracks",
];

// ---- the table ---------------------------------------------------------------------------------

/**
 * Who calls: the user's access token (default), only the apikey, the anon key as bearer, no
 * apikey, a token signed with another secret, an expired token of the tenant.
 */
type Auth = "user" | "no-bearer" | "anon-bearer" | "no-apikey" | "bad-signature" | "expired";

interface Req {
  method?: "GET" | "HEAD" | "POST" | "PATCH" | "DELETE";
  /** After /rest/v1, with the query string as a client writes it. */
  path: string;
  headers?: Record<string, string>;
  /** Sent as JSON; a string is sent as it is (for malformed bodies). */
  body?: unknown;
  auth?: Auth;
}

interface Expect {
  /** One status, or the statuses allowed (a planner's estimate decides between 200 and 206). */
  status: number | number[];
  /** The value of `key` (default title) in each row, in order. */
  rows?: unknown[];
  key?: string;
  /** The whole JSON body. */
  body?: unknown;
  /** A part of the JSON body: objects compare on the keys given, arrays on length and each element. */
  match?: unknown;
  /** The keys of the first row (or of the object), in order. */
  keys?: string[];
  /** The raw body. */
  text?: string;
  /** Header values: a string exactly, a RegExp to match, null for absent. */
  headers?: Record<string, string | RegExp | null>;
  /** Preference-Applied, as a set of preferences. */
  prefs?: string[];
  /** A value derived from the JSON body, compared with `derived`. */
  derive?: (json: unknown) => unknown;
  derived?: unknown;
}

interface Case {
  name: string;
  req: Req;
  expect: Expect;
  /** A second request, e.g. to check what a write left behind. */
  followUp?: { req: Req; expect: Expect };
}

const OBJECT = "application/vnd.pgrst.object+json";
const JSON_TYPE = "application/json; charset=utf-8";

/** `releases?select=title&<filter>&order=title`: the titles, in order. */
const titles = (filter: string, rows: string[]): Case => ({
  name: `releases ${filter}`,
  req: { path: `/releases?select=title&${filter}&order=title` },
  expect: { status: 200, rows },
});

const trackTitles = (filter: string, order: string, rows: string[]): Case => ({
  name: `tracks ${filter}`,
  req: { path: `/tracks?select=title&${filter}&order=${order}` },
  expect: { status: 200, rows },
});

const pgError = (code: string, message?: string, details?: string | null) => ({
  code,
  ...(message === undefined ? {} : { message }),
  ...(details === undefined ? {} : { details }),
});

const CASES: Case[] = [
  // ---- filters ---------------------------------------------------------------------------------
  titles("release_type=eq.album", [NIGHT, QUIET]),
  titles("release_type=neq.album", [MORNING, PAPER, SAY, SONGS]),
  titles("release_date=gt.2023-06-01", [NIGHT, QUIET]),
  titles("release_date=gte.2023-06-01", [MORNING, NIGHT, QUIET]),
  trackTitles("duration=lt.200", "duration", ["Owl Intro", "Paper Boats"]),
  trackTitles("duration=lte.200", "duration", ["Owl Intro", "Paper Boats", "Sunrise"]),
  titles("title=like.*o*", [MORNING, PAPER, QUIET, SONGS]),
  titles("title=ilike.*OWL", [NIGHT]),
  titles("title=like(any).{Night*,*Light}", [MORNING, NIGHT]),
  titles("title=like(all).{*o*,*a*}", [PAPER]),
  titles("release_type=eq(any).{ep,compilation}", [MORNING, SONGS]),
  titles("title=match.^[MN]", [MORNING, NIGHT]),
  titles("title=imatch.STORM$", [QUIET]),
  titles('title=in.("Songs, Vol. 2","Say \\"Hi\\"",Night Owl)', [NIGHT, SAY, SONGS]),
  titles("release_date=is.null", [PAPER]),
  titles("upc=is.not_null", [NIGHT, PAPER, QUIET]),
  titles("explicit=is.true", [SAY]),
  titles("explicit=is.false", [MORNING, NIGHT, PAPER, QUIET, SONGS]),
  titles("explicit=is.unknown", []),
  titles("primary_genre=isdistinct.pop", [NIGHT, PAPER, QUIET, SONGS]),
  titles("genres=cs.{electronic}", [MORNING, NIGHT]),
  titles("genres=cd.{pop,electronic,ambient}", [MORNING, NIGHT, SAY, SONGS]),
  titles("genres=ov.{folk,jazz}", [PAPER, QUIET]),
  trackTitles('contributors=cs.[{"role":"composer"}]', "title", ["Owl Intro", "Sunrise"]),
  trackTitles(
    'contributors=cd.[{"name":"Bo Diaz","role":"producer"},{"name":"Ann Lee","role":"composer"}]',
    "title",
    ["Dawn Chorus", "Midnight Run", "Owl Intro", "Thunder"],
  ),
  {
    // PostgreSQL has no && for jsonb: 42883 undefined_function, which PostgREST answers with 404.
    name: "tracks contributors=ov.[...] (no && for jsonb: 42883, 404)",
    req: { path: '/tracks?select=title&contributors=ov.[{"role":"composer"}]' },
    expect: { status: 404, match: pgError("42883") },
  },
  titles("title=fts(english).owls", [NIGHT]),
  titles("title=fts.storm", [QUIET]),
  titles("title=plfts(english).paper boats", [PAPER]),
  titles("title=phfts(english).night owl", [NIGHT]),
  titles("title=wfts(english).night or light", [MORNING, NIGHT]),
  titles("title=not.like.*o*", [NIGHT, SAY]),
  titles("or=(release_type.eq.ep,explicit.is.true)", [MORNING, SAY]),
  titles("and=(release_date.gte.2023-01-01,release_date.lt.2025-01-01)", [MORNING, NIGHT]),
  titles("or=(and(release_type.eq.album,release_date.gt.2024-06-01),title.eq.Paper Boats)", [PAPER, QUIET]),
  titles("not.and=(release_type.eq.album,status.eq.draft)", [MORNING, PAPER, QUIET, SAY, SONGS]),
  titles("or=(title.eq.Night Owl,not.or(release_type.eq.album,release_type.eq.single,release_type.eq.ep))", [
    NIGHT,
    SONGS,
  ]),
  {
    name: "artist_profiles store_ids->>deezer=eq.27",
    req: { path: "/artist_profiles?select=name&store_ids->>deezer=eq.27" },
    expect: { status: 200, key: "name", rows: ["Aurora Vale"] },
  },
  trackTitles("contributors->0->>role=eq.composer", "title", ["Owl Intro", "Sunrise"]),
  {
    name: "a filter on an embed filters the embedded array, not the parents",
    req: { path: "/releases?select=title,tracks(title)&tracks.title=eq.Sunrise&order=title" },
    expect: {
      status: 200,
      body: [
        { title: MORNING, tracks: [{ title: "Sunrise" }] },
        { title: NIGHT, tracks: [] },
        { title: PAPER, tracks: [] },
        { title: QUIET, tracks: [] },
        { title: SAY, tracks: [] },
        { title: SONGS, tracks: [] },
      ],
    },
  },
  {
    name: "with tracks!inner the embed filter filters the parents",
    req: { path: "/releases?select=title,tracks!inner(title)&tracks.title=eq.Sunrise" },
    expect: { status: 200, body: [{ title: MORNING, tracks: [{ title: "Sunrise" }] }] },
  },
  titles("title=eq.Night+Owl", [NIGHT]),
  titles('or=(title.eq."Say \\"Hi\\"",title.eq."Songs, Vol. 2")', [SAY, SONGS]),
  titles('title=eq.Say "Hi"', [SAY]),

  // ---- select ----------------------------------------------------------------------------------
  {
    name: "select=* returns every column in table order",
    req: { path: `/releases?select=*&id=eq.${R1}` },
    expect: {
      status: 200,
      keys: RELEASE_COLUMNS,
      match: [
        {
          id: R1,
          artist_id: A1,
          title: NIGHT,
          release_type: "album",
          artist_name: "Aurora Vale",
          genres: ["electronic", "ambient"],
          release_date: "2024-01-15",
          upc: UPC1,
          explicit: false,
          status: "draft",
          territories: [],
        },
      ],
    },
  },
  {
    name: "select a column list",
    req: { path: `/releases?select=title,release_type,genres&id=eq.${R2}` },
    expect: { status: 200, body: [{ title: MORNING, release_type: "ep", genres: ["pop", "electronic"] }] },
  },
  {
    name: "select with aliases",
    req: { path: `/releases?select=name:title,kind:release_type&id=eq.${R2}` },
    expect: { status: 200, body: [{ name: MORNING, kind: "ep" }] },
  },
  {
    name: "select with ::text casts",
    req: { path: `/tracks?select=title,track_number::text,duration::text&id=eq.${T2}` },
    expect: { status: 200, body: [{ title: "Midnight Run", track_number: "2", duration: "245" }] },
  },
  {
    name: "select JSON paths: named after their last key",
    req: { path: `/artist_profiles?select=name,store_ids->>deezer,store_ids->spotify&id=eq.${A1}` },
    expect: { status: 200, body: [{ name: "Aurora Vale", deezer: "27", spotify: "4Z8W" }] },
  },
  {
    name: "select JSON paths ending in an index: named after the last key, else the column",
    req: { path: `/tracks?select=title,contributors->0,contributors->1->>name&id=eq.${T1}` },
    expect: { status: 200, body: [{ title: "Owl Intro", contributors: ANN, name: "Bo Diaz" }] },
  },
  {
    name: "embeds: *,tracks(*) one-to-many as an array, artist_profiles(name) many-to-one as an object",
    req: { path: `/releases?select=*,tracks(*),artist_profiles(name)&id=eq.${R1}&tracks.order=track_number` },
    expect: {
      status: 200,
      keys: [...RELEASE_COLUMNS, "tracks", "artist_profiles"],
      match: [
        {
          title: NIGHT,
          artist_profiles: { name: "Aurora Vale" },
          tracks: [
            { id: T1, title: "Owl Intro", isrc: "USABC2400001", duration: 60, contributors: [ANN, BO] },
            { id: T2, title: "Midnight Run", isrc: "USABC2400002", track_number: 2 },
            { id: T3, title: "Dawn Chorus", isrc: null, contributors: [] },
          ],
        },
      ],
    },
  },
  {
    name: "an embedded to-many with no rows is an empty array",
    req: { path: `/artist_profiles?select=name,releases(title)&id=eq.${A3}` },
    expect: { status: 200, body: [{ name: "Cobalt Drift", releases: [] }] },
  },
  {
    name: "!inner without a filter drops parents with no embedded rows",
    req: { path: "/artist_profiles?select=name,releases!inner(id)&order=name" },
    expect: { status: 200, key: "name", rows: ["Aurora Vale", "Basement Choir"] },
  },
  {
    name: "an embed hinted by its constraint name, aliased",
    req: {
      path: `/releases?select=title,artist:artist_profiles!releases_artist_id_account_id_fkey(name)&id=eq.${R3}`,
    },
    expect: { status: 200, body: [{ title: PAPER, artist: { name: "Basement Choir" } }] },
  },
  {
    name: "a spread embed: ...artist_profiles(name)",
    req: { path: `/releases?select=title,...artist_profiles(name)&id=eq.${R3}` },
    expect: { status: 200, body: [{ title: PAPER, name: "Basement Choir" }] },
  },
  {
    name: "a nested embed: artist_profiles(name,releases(title))",
    req: {
      path: `/releases?select=title,artist_profiles(name,releases(title))&id=eq.${R3}&artist_profiles.releases.order=title`,
    },
    expect: {
      status: 200,
      body: [
        {
          title: PAPER,
          artist_profiles: {
            name: "Basement Choir",
            releases: [{ title: PAPER }, { title: QUIET }, { title: SONGS }],
          },
        },
      ],
    },
  },
  {
    name: "two levels down: tracks(title,track_analytics(*))",
    req: {
      path: `/releases?select=title,tracks(title,track_analytics(*))&id=eq.${R1}&tracks.order=track_number&tracks.track_analytics.order=streams.desc`,
    },
    expect: {
      status: 200,
      match: [
        {
          title: NIGHT,
          tracks: [
            {
              title: "Owl Intro",
              track_analytics: [
                { track_id: T1, release_id: R1, store: "spotify", streams: 600, currency: "EUR" },
                { track_id: T1, store: "deezer", streams: 100 },
              ],
            },
            { title: "Midnight Run", track_analytics: [{ track_id: T2, store: "spotify", streams: 400 }] },
            { title: "Dawn Chorus", track_analytics: [] },
          ],
        },
      ],
    },
  },
  {
    name: "release_analytics of the user's releases, read through RLS",
    req: { path: "/release_analytics?select=store,streams&order=streams.desc" },
    expect: {
      status: 200,
      body: [
        { store: "spotify", streams: 1000 },
        { store: "deezer", streams: 250 },
        { store: "spotify", streams: 40 },
      ],
    },
  },

  // ---- order, limit, offset, Range -------------------------------------------------------------
  {
    name: "order=release_date.asc (nulls last)",
    req: { path: "/releases?select=title&order=release_date.asc" },
    expect: { status: 200, rows: [SAY, SONGS, MORNING, NIGHT, QUIET, PAPER] },
  },
  {
    name: "order=release_date.desc (nulls first)",
    req: { path: "/releases?select=title&order=release_date.desc" },
    expect: { status: 200, rows: [PAPER, QUIET, NIGHT, MORNING, SONGS, SAY] },
  },
  {
    name: "order=release_date.nullsfirst",
    req: { path: "/releases?select=title&order=release_date.nullsfirst" },
    expect: { status: 200, rows: [PAPER, SAY, SONGS, MORNING, NIGHT, QUIET] },
  },
  {
    name: "order=release_date.desc.nullslast",
    req: { path: "/releases?select=title&order=release_date.desc.nullslast" },
    expect: { status: 200, rows: [QUIET, NIGHT, MORNING, SONGS, SAY, PAPER] },
  },
  {
    name: "order by several columns",
    req: { path: "/releases?select=title&order=release_type.asc,title.desc" },
    expect: { status: 200, rows: [QUIET, NIGHT, SONGS, MORNING, SAY, PAPER] },
  },
  {
    name: "tracks.order=track_number.desc orders inside the embed",
    req: { path: `/releases?select=title,tracks(track_number)&id=eq.${R1}&tracks.order=track_number.desc` },
    expect: {
      status: 200,
      body: [{ title: NIGHT, tracks: [{ track_number: 3 }, { track_number: 2 }, { track_number: 1 }] }],
    },
  },
  {
    name: "limit",
    req: { path: "/releases?select=title&order=title&limit=2" },
    expect: { status: 200, rows: [MORNING, NIGHT], headers: { "content-range": "0-1/*" } },
  },
  {
    name: "limit and offset",
    req: { path: "/releases?select=title&order=title&limit=2&offset=2" },
    expect: { status: 200, rows: [PAPER, QUIET], headers: { "content-range": "2-3/*" } },
  },
  {
    name: "tracks.limit=1 limits inside the embed",
    req: {
      path: `/releases?select=title,tracks(title)&id=eq.${R1}&tracks.order=track_number&tracks.limit=1`,
    },
    expect: { status: 200, body: [{ title: NIGHT, tracks: [{ title: "Owl Intro" }] }] },
  },
  {
    name: "Range: 0-1 pages, with Content-Range",
    req: { path: "/releases?select=title&order=title", headers: { Range: "0-1" } },
    expect: { status: 200, rows: [MORNING, NIGHT], headers: { "content-range": "0-1/*" } },
  },
  {
    name: "count=exact on a part: 206 with the total",
    req: { path: "/releases?select=title&order=title&limit=2", headers: { Prefer: "count=exact" } },
    expect: {
      status: 206,
      rows: [MORNING, NIGHT],
      headers: { "content-range": "0-1/6" },
      prefs: ["count=exact"],
    },
  },
  {
    name: "count=exact on everything: 200 with the total",
    req: { path: "/releases?select=title&order=title", headers: { Prefer: "count=exact" } },
    expect: {
      status: 200,
      rows: [MORNING, NIGHT, PAPER, QUIET, SAY, SONGS],
      headers: { "content-range": "0-5/6" },
    },
  },
  {
    name: "count=planned: the planner's estimate as the total",
    req: { path: "/releases?select=title&order=title&limit=2", headers: { Prefer: "count=planned" } },
    expect: {
      status: [200, 206],
      rows: [MORNING, NIGHT],
      headers: { "content-range": /^0-1\/\d+$/ },
      prefs: ["count=planned"],
    },
  },
  {
    name: "count=estimated: a number as the total",
    req: { path: "/releases?select=title&order=title&limit=2", headers: { Prefer: "count=estimated" } },
    expect: {
      status: [200, 206],
      rows: [MORNING, NIGHT],
      headers: { "content-range": /^0-1\/\d+$/ },
      prefs: ["count=estimated"],
    },
  },
  {
    name: "a Range past the end with count=exact: 416 PGRST103",
    req: {
      path: "/releases?select=title&order=title",
      headers: { Range: "10-12", Prefer: "count=exact" },
    },
    expect: {
      status: 416,
      match: pgError(
        "PGRST103",
        "Requested range not satisfiable",
        "An offset of 10 was requested, but there are only 6 rows.",
      ),
      headers: { "content-range": "*/6" },
    },
  },
  {
    name: "a Range starting exactly at the total with count=exact: 206, no rows",
    req: {
      path: "/releases?select=title&order=title",
      headers: { Range: "6-7", Prefer: "count=exact" },
    },
    expect: { status: 206, body: [], headers: { "content-range": "*/6" } },
  },

  // ---- Accept ----------------------------------------------------------------------------------
  {
    name: "Accept: application/json",
    req: { path: `/releases?select=title&id=eq.${R1}`, headers: { Accept: "application/json" } },
    expect: { status: 200, body: [{ title: NIGHT }], headers: { "content-type": JSON_TYPE } },
  },
  {
    name: "Accept: vnd.pgrst.object+json with one row: the object",
    req: { path: `/releases?select=title,release_type&id=eq.${R1}`, headers: { Accept: OBJECT } },
    expect: {
      status: 200,
      body: { title: NIGHT, release_type: "album" },
      headers: { "content-type": `${OBJECT}; charset=utf-8` },
    },
  },
  {
    name: "Accept: vnd.pgrst.object+json with no row: 406 PGRST116",
    req: { path: "/releases?select=title&title=eq.Nothing", headers: { Accept: OBJECT } },
    expect: {
      status: 406,
      match: pgError(
        "PGRST116",
        "Cannot coerce the result to a single JSON object",
        "The result contains 0 rows",
      ),
    },
  },
  {
    name: "Accept: vnd.pgrst.object+json with two rows: 406 PGRST116",
    req: { path: "/releases?select=title&release_type=eq.album", headers: { Accept: OBJECT } },
    expect: {
      status: 406,
      match: pgError(
        "PGRST116",
        "Cannot coerce the result to a single JSON object",
        "The result contains 2 rows",
      ),
    },
  },
  {
    name: "Accept: text/csv",
    req: {
      path: `/releases?select=release_type,release_date,upc&id=in.(${R1},${R3})&order=release_type`,
      headers: { Accept: "text/csv" },
    },
    expect: {
      status: 200,
      text: `release_type,release_date,upc\nalbum,2024-01-15,${UPC1}\nsingle,,${UPC3}`,
      headers: { "content-type": "text/csv; charset=utf-8" },
    },
  },
  {
    // PostgREST writes each row as PostgreSQL's record text: a value with a space is quoted.
    name: "Accept: text/csv quotes values as PostgreSQL's record output does",
    req: {
      path: "/releases?select=title,release_type&order=title&limit=3",
      headers: { Accept: "text/csv" },
    },
    expect: {
      status: 200,
      text: 'title,release_type\n"Morning Light",ep\n"Night Owl",album\n"Paper Boats",single',
    },
  },
  {
    name: "HEAD: no body, the headers of the GET",
    req: {
      method: "HEAD",
      path: "/releases?select=title&order=title&limit=2",
      headers: { Prefer: "count=exact" },
    },
    expect: {
      status: 206,
      text: "",
      headers: { "content-range": "0-1/6", "content-type": JSON_TYPE },
    },
  },
  {
    name: "an Accept it cannot produce: 406 PGRST107",
    req: { path: "/releases?select=title", headers: { Accept: "application/xml" } },
    expect: {
      status: 406,
      match: pgError("PGRST107", "None of these media types are available: application/xml"),
    },
  },

  // ---- errors ----------------------------------------------------------------------------------
  {
    name: "PGRST100: a filter that does not parse, with the position",
    req: { path: "/releases?title=eqx.1" },
    expect: {
      status: 400,
      match: pgError(
        "PGRST100",
        '"failed to parse filter (eqx.1)" (line 1, column 3)',
        'unexpected "x" expecting operator (eq, gt, ...)',
      ),
    },
  },
  {
    name: "PGRST200: an embed with no relationship",
    req: { path: "/releases?select=*,nope(*)" },
    expect: {
      status: 400,
      match: pgError(
        "PGRST200",
        "Could not find a relationship between 'releases' and 'nope' in the schema cache",
        "Searched for a foreign key relationship between 'releases' and 'nope' in the schema 'public', but no matches were found.",
      ),
    },
  },
  {
    name: "42703: an unknown column in select",
    req: { path: "/releases?select=title,nope" },
    expect: { status: 400, match: pgError("42703", "column releases.nope does not exist") },
  },
  {
    name: "42703: an unknown column in a filter",
    req: { path: "/releases?select=title&nope=eq.1" },
    expect: { status: 400, match: pgError("42703", "column releases.nope does not exist") },
  },
  {
    name: "PGRST205: an unknown table",
    req: { path: "/nope" },
    expect: {
      status: 404,
      match: pgError("PGRST205", "Could not find the table 'public.nope' in the schema cache"),
    },
  },
  {
    name: "PGRST205: the internal users table is not exposed",
    req: { path: "/users?select=*" },
    expect: {
      status: 404,
      match: pgError("PGRST205", "Could not find the table 'public.users' in the schema cache"),
    },
  },
  {
    name: "PGRST205: the internal api_keys table is not exposed",
    req: { path: "/api_keys" },
    expect: {
      status: 404,
      match: pgError("PGRST205", "Could not find the table 'public.api_keys' in the schema cache"),
    },
  },
  {
    name: "22P02: a malformed uuid",
    req: { path: "/releases?id=eq.not-a-uuid" },
    expect: {
      status: 400,
      match: pgError("22P02", 'invalid input syntax for type uuid: "not-a-uuid"'),
    },
  },
  {
    name: "PGRST106: Accept-Profile names a schema that is not exposed",
    req: { path: "/releases?select=title", headers: { "Accept-Profile": "other" } },
    expect: {
      status: 406,
      match: pgError("PGRST106", "The schema must be one of the following: public"),
    },
  },

  // ---- the gateway -----------------------------------------------------------------------------
  {
    name: "no Authorization header: 401 PGRST302",
    req: { path: "/releases?select=title", auth: "no-bearer" },
    expect: { status: 401, match: pgError("PGRST302", "Anonymous access is disabled") },
  },
  {
    name: "a token with a bad signature: 401 PGRST301 with WWW-Authenticate",
    req: { path: "/releases?select=title", auth: "bad-signature" },
    expect: {
      status: 401,
      match: pgError("PGRST301"),
      headers: { "www-authenticate": /^Bearer error="invalid_token"/ },
    },
  },
  {
    name: "an expired token: 401 PGRST303",
    req: { path: "/releases?select=title", auth: "expired" },
    expect: {
      status: 401,
      match: pgError("PGRST303", "JWT expired"),
      headers: { "www-authenticate": /^Bearer error="invalid_token"/ },
    },
  },
  {
    name: "no apikey: 401",
    req: { path: "/releases?select=title", auth: "no-apikey" },
    expect: { status: 401, match: { message: "No API key found in request" } },
  },
  {
    name: "the anon key as bearer: anon has no privilege on the catalog, 42501 as 401",
    req: { path: "/releases?select=title", auth: "anon-bearer" },
    expect: {
      status: 401,
      match: pgError("42501", "permission denied for table releases"),
      headers: { "www-authenticate": "Bearer" },
    },
  },

  // ---- the OpenAPI document --------------------------------------------------------------------
  {
    name: "GET /rest/v1/ returns the OpenAPI document of the exposed tables",
    req: { path: "/" },
    expect: {
      status: 200,
      headers: { "content-type": /^application\/openapi\+json/ },
      derive: (json) =>
        Object.keys((json as { paths: Record<string, unknown> }).paths)
          // The tables; the functions (/rpc/…) are test/rest-rpc.test.ts's.
          .filter((p) => p !== "/" && !p.startsWith("/rpc/"))
          .sort(),
      derived: EXPOSED_PATHS,
    },
  },

  // ---- writes and Prefer -----------------------------------------------------------------------
  {
    name: "POST with return=minimal: 201, no body",
    req: {
      method: "POST",
      path: "/artist_profiles",
      headers: { Prefer: "return=minimal" },
      body: { id: W(10), name: "Minimal Artist" },
    },
    expect: {
      status: 201,
      text: "",
      headers: { "content-range": "*/*", location: null },
      prefs: ["return=minimal"],
    },
    followUp: {
      req: { path: `/artist_profiles?select=name&id=eq.${W(10)}` },
      expect: { status: 200, key: "name", rows: ["Minimal Artist"] },
    },
  },
  {
    name: "POST with return=headers-only: 201 and a Location header",
    req: {
      method: "POST",
      path: "/artist_profiles",
      headers: { Prefer: "return=headers-only" },
      body: { id: W(11), name: "Located Artist" },
    },
    expect: {
      status: 201,
      text: "",
      headers: { location: `/artist_profiles?id=eq.${W(11)}` },
      prefs: ["return=headers-only"],
    },
  },
  {
    name: "POST with return=representation: 201 and the rows",
    req: {
      method: "POST",
      path: "/artist_profiles?select=name,store_ids",
      headers: { Prefer: "return=representation" },
      body: { id: W(12), name: "Shown Artist", store_ids: { deezer: "12" } },
    },
    expect: {
      status: 201,
      body: [{ name: "Shown Artist", store_ids: { deezer: "12" } }],
      headers: { "content-type": JSON_TYPE },
      prefs: ["return=representation"],
    },
  },
  {
    name: "23505: a duplicate primary key is 409",
    req: { method: "POST", path: "/artist_profiles", body: { id: W(12), name: "Again" } },
    expect: {
      status: 409,
      match: pgError("23505", 'duplicate key value violates unique constraint "artist_profiles_pkey"'),
    },
  },
  {
    name: "resolution=merge-duplicates with on_conflict=id updating the row: 200 (nothing inserted)",
    req: {
      method: "POST",
      path: "/artist_profiles?on_conflict=id&select=id,name",
      headers: { Prefer: "resolution=merge-duplicates, return=representation" },
      body: [{ id: W(12), name: "Renamed Artist" }],
    },
    expect: {
      status: 200,
      body: [{ id: W(12), name: "Renamed Artist" }],
      prefs: ["resolution=merge-duplicates", "return=representation"],
    },
  },
  {
    name: "resolution=merge-duplicates inserting a new row: 201",
    req: {
      method: "POST",
      path: "/artist_profiles?on_conflict=id&select=id,name",
      headers: { Prefer: "resolution=merge-duplicates, return=representation" },
      body: [{ id: W(17), name: "Merged In" }],
    },
    expect: { status: 201, body: [{ id: W(17), name: "Merged In" }] },
  },
  {
    name: "resolution=ignore-duplicates with on_conflict=id: the existing row is kept",
    req: {
      method: "POST",
      path: "/artist_profiles?on_conflict=id&select=id,name",
      headers: { Prefer: "resolution=ignore-duplicates, return=representation" },
      body: [
        { id: W(12), name: "Ignored" },
        { id: W(13), name: "New Artist" },
      ],
    },
    expect: {
      status: 201,
      body: [{ id: W(13), name: "New Artist" }],
      prefs: ["resolution=ignore-duplicates", "return=representation"],
    },
    followUp: {
      req: { path: `/artist_profiles?select=name&id=in.(${W(12)},${W(13)})&order=name` },
      expect: { status: 200, key: "name", rows: ["New Artist", "Renamed Artist"] },
    },
  },
  {
    name: "missing=default: a key one object omits takes the column default",
    req: {
      method: "POST",
      path: "/releases?select=title,release_type,status",
      headers: { Prefer: "missing=default, return=representation" },
      body: [
        { id: W(20), artist_id: A3, title: "Default One", release_type: "ep" },
        { id: W(21), artist_id: A3, title: "Default Two" },
      ],
    },
    expect: {
      status: 201,
      body: [
        { title: "Default One", release_type: "ep", status: "draft" },
        { title: "Default Two", release_type: "single", status: "draft" },
      ],
      prefs: ["missing=default", "return=representation"],
    },
  },
  {
    name: "23502: without missing=default the omitted key is null",
    req: {
      method: "POST",
      path: "/releases",
      body: [
        { id: W(22), artist_id: A3, title: "Null One", release_type: "ep" },
        { id: W(23), artist_id: A3, title: "Null Two" },
      ],
    },
    expect: {
      status: 400,
      match: pgError(
        "23502",
        'null value in column "release_type" of relation "releases" violates not-null constraint',
      ),
    },
  },
  {
    name: "23514: a failed check constraint",
    req: {
      method: "POST",
      path: "/releases",
      body: { id: W(24), artist_id: A3, title: "Bad Type", release_type: "bogus" },
    },
    expect: {
      status: 400,
      match: pgError(
        "23514",
        'new row for relation "releases" violates check constraint "releases_release_type_check"',
      ),
    },
  },
  {
    name: "23503: a release of an artist that does not exist is 409",
    req: {
      method: "POST",
      path: "/releases",
      body: { artist_id: uuid("aaaaaaaa", 255), title: "Orphan" },
    },
    expect: { status: 409, match: pgError("23503") },
  },
  {
    name: "42501: a column the user may not write is 403",
    req: {
      method: "POST",
      path: "/releases",
      body: { artist_id: A3, title: "Sneaky", status_reason: "approved by me" },
    },
    expect: { status: 403, match: pgError("42501", "permission denied for table releases") },
  },
  {
    name: "PGRST204: a body key that is not a column",
    req: { method: "POST", path: "/artist_profiles", body: { name: "X", nope: 1 } },
    expect: {
      status: 400,
      match: pgError("PGRST204", "Could not find the 'nope' column of 'artist_profiles' in the schema cache"),
    },
  },
  {
    name: "PGRST102: a body that is not JSON",
    req: { method: "POST", path: "/artist_profiles", body: '{"name": "Broken' },
    expect: { status: 400, match: pgError("PGRST102", "Empty or invalid json") },
  },
  {
    name: "tx=rollback: the insert is answered but not kept",
    req: {
      method: "POST",
      path: "/artist_profiles?select=name",
      headers: { Prefer: "return=representation, tx=rollback" },
      body: { id: W(14), name: "Rolled Back Artist" },
    },
    expect: {
      status: 201,
      body: [{ name: "Rolled Back Artist" }],
      prefs: ["return=representation", "tx=rollback"],
    },
    followUp: {
      req: { path: `/artist_profiles?select=name&id=eq.${W(14)}` },
      expect: { status: 200, body: [] },
    },
  },
  {
    name: "columns= with quoted names: only those keys are inserted",
    req: {
      method: "POST",
      path: '/artist_profiles?columns=id,name,"streamingA_id"&select=name,bio,streamingA_id',
      headers: { Prefer: "return=representation" },
      body: [
        { id: W(15), name: "Column One", streamingA_id: "sa-1", bio: "not a chosen column" },
        { id: W(16), name: "Column Two", bio: "not a chosen column either" },
      ],
    },
    expect: {
      status: 201,
      body: [
        { name: "Column One", bio: null, streamingA_id: "sa-1" },
        { name: "Column Two", bio: null, streamingA_id: null },
      ],
    },
  },
  {
    name: "PATCH with return=representation: 200 and the rows",
    req: {
      method: "PATCH",
      path: `/releases?id=eq.${R2}&select=title,label_name`,
      headers: { Prefer: "return=representation" },
      body: { label_name: "Dawn Records" },
    },
    expect: {
      status: 200,
      body: [{ title: MORNING, label_name: "Dawn Records" }],
      prefs: ["return=representation"],
    },
  },
  {
    name: "PATCH without a return preference: 204, Content-Range of the rows changed",
    req: { method: "PATCH", path: `/releases?id=eq.${R3}`, body: { label_name: "Harbor" } },
    expect: { status: 204, text: "", headers: { "content-range": "0-0/*" } },
    followUp: {
      req: { path: `/releases?select=label_name&id=eq.${R3}` },
      expect: { status: 200, body: [{ label_name: "Harbor" }] },
    },
  },
  {
    name: "PATCH with an empty object: 204, no row touched",
    req: { method: "PATCH", path: `/releases?id=eq.${R3}`, body: {} },
    expect: { status: 204, text: "", headers: { "content-range": "*/*" } },
    followUp: {
      req: { path: `/releases?select=label_name&id=eq.${R3}` },
      expect: { status: 200, body: [{ label_name: "Harbor" }] },
    },
  },
  {
    name: "max-affected=1 with handling=strict on a PATCH of 2 rows: 400 PGRST124, nothing changed",
    req: {
      method: "PATCH",
      path: `/releases?artist_id=eq.${A1}&release_type=in.(album,ep)`,
      headers: { Prefer: "handling=strict, max-affected=1" },
      body: { label_name: "Too Many" },
    },
    expect: {
      status: 400,
      match: pgError(
        "PGRST124",
        "Query result exceeds max-affected preference constraint",
        "The query affects 2 rows",
      ),
    },
    followUp: {
      req: { path: "/releases?select=title&label_name=eq.Too Many" },
      expect: { status: 200, body: [] },
    },
  },
  {
    name: "max-affected=2 with handling=strict on a PATCH of 2 rows: applied",
    req: {
      method: "PATCH",
      path: `/releases?artist_id=eq.${A1}&release_type=in.(album,ep)`,
      headers: { Prefer: "handling=strict, max-affected=2" },
      body: { catalog_number: "AV-1" },
    },
    expect: { status: 204, prefs: ["handling=strict", "max-affected=2"] },
    followUp: {
      req: { path: "/releases?select=title&catalog_number=eq.AV-1&order=title" },
      expect: { status: 200, rows: [MORNING, NIGHT] },
    },
  },
  {
    name: "Accept: vnd.pgrst.object+json on a PATCH of 2 rows: 406 PGRST116, rolled back",
    req: {
      method: "PATCH",
      path: `/releases?release_type=eq.single&artist_id=in.(${A1},${A2})`,
      headers: { Accept: OBJECT },
      body: { label_name: "Rolled Back" },
    },
    expect: {
      status: 406,
      match: pgError(
        "PGRST116",
        "Cannot coerce the result to a single JSON object",
        "The result contains 2 rows",
      ),
    },
    followUp: {
      req: { path: "/releases?select=title&label_name=eq.Rolled Back" },
      expect: { status: 200, body: [] },
    },
  },
  {
    name: "handling=strict with a preference it does not know: 400 PGRST122",
    req: { path: "/releases?select=title", headers: { Prefer: "handling=strict, foo=bar" } },
    expect: {
      status: 400,
      match: pgError(
        "PGRST122",
        "Invalid preferences given with handling=strict",
        "Invalid preferences: foo=bar",
      ),
    },
  },
  {
    name: "several preferences in one header come back in Preference-Applied",
    req: {
      path: `/releases?select=title&artist_id=in.(${A1},${A2})&order=title&limit=1`,
      headers: { Prefer: "count=exact, handling=lenient, foo=bar" },
    },
    expect: {
      status: 206,
      rows: [MORNING],
      headers: { "content-range": "0-0/6" },
      prefs: ["count=exact", "handling=lenient"],
    },
  },
  {
    name: "BL001: editing a submitted release is 409",
    req: { method: "PATCH", path: `/releases?id=eq.${R4}`, body: { title: "Louder Storm" } },
    expect: { status: 409, match: pgError("BL001") },
  },
  {
    name: "DELETE without a return preference: 204",
    req: { method: "DELETE", path: `/artist_profiles?id=eq.${W(10)}` },
    expect: { status: 204, text: "", headers: { "content-range": "*/*" } },
    followUp: {
      req: { path: `/artist_profiles?select=name&id=eq.${W(10)}` },
      expect: { status: 200, body: [] },
    },
  },
  {
    name: "DELETE with return=representation and count=exact: 200, the rows, the count",
    req: {
      method: "DELETE",
      path: `/artist_profiles?id=eq.${W(11)}&select=name`,
      headers: { Prefer: "return=representation, count=exact" },
    },
    expect: {
      status: 200,
      body: [{ name: "Located Artist" }],
      headers: { "content-range": "*/1" },
      prefs: ["return=representation", "count=exact"],
    },
  },
];

// ---- running the table -------------------------------------------------------------------------

/** `value` cut down to the shape of `expected`: the keys it names, the elements it lists. */
function project(value: unknown, expected: unknown): unknown {
  if (Array.isArray(expected)) {
    if (!Array.isArray(value)) return value;
    return value.map((v, i) => (i < expected.length ? project(v, expected[i]) : v));
  }
  if (expected !== null && typeof expected === "object") {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
    const v = value as Record<string, unknown>;
    return Object.fromEntries(
      Object.entries(expected).map(([k, e]) => [k, k in v ? project(v[k], e) : "<missing>"]),
    );
  }
  return value;
}

/** A query string as a client sends it: characters URLs may not carry raw are percent-encoded. */
const encodePath = (path: string) => path.replace(/[ "{}|\\^`<>[\]]/g, (c) => encodeURIComponent(c));

describeEachEngine("rest grammar: /rest/v1 answers as PostgREST v12", (t) => {
  let app: RunningApp;
  let keys: TenantKeys;
  const tokens: Record<"user" | "bad-signature" | "expired", string> = {
    user: "",
    "bad-signature": "",
    expired: "",
  };

  function send(req: Req): Promise<Response> {
    const auth = req.auth ?? "user";
    const headers: Record<string, string> = {};
    if (auth !== "no-apikey") headers.apikey = keys.anon_key;
    const bearer =
      auth === "anon-bearer"
        ? keys.anon_key
        : auth === "no-bearer" || auth === "no-apikey"
          ? ""
          : tokens[auth];
    if (auth === "no-apikey") headers.authorization = `Bearer ${tokens.user}`;
    else if (bearer) headers.authorization = `Bearer ${bearer}`;
    if (req.body !== undefined) headers["content-type"] = "application/json";
    Object.assign(headers, req.headers);
    return fetch(`${app.url}/rest/v1${encodePath(req.path)}`, {
      method: req.method ?? "GET",
      headers,
      ...(req.body === undefined
        ? {}
        : { body: typeof req.body === "string" ? req.body : JSON.stringify(req.body) }),
    });
  }

  /** Sends `req` and compares what came back with `expect`, all of it in one assertion. */
  async function check(req: Req, expect: Expect): Promise<void> {
    const res = await send(req);
    const text = await res.text();
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    const observed: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    const statuses = Array.isArray(expect.status) ? expect.status : [expect.status];
    observed.status = statuses.includes(res.status) ? expect.status : res.status;
    expected.status = expect.status;
    if (expect.rows) {
      const key = expect.key ?? "title";
      observed.rows = Array.isArray(json) ? json.map((r) => (r as Record<string, unknown>)[key]) : json;
      expected.rows = expect.rows;
    }
    if ("body" in expect) {
      observed.body = json;
      expected.body = expect.body;
    }
    if ("match" in expect) {
      observed.match = project(json, expect.match);
      expected.match = expect.match;
    }
    if (expect.keys) {
      const first = Array.isArray(json) ? json[0] : json;
      observed.keys = first && typeof first === "object" ? Object.keys(first) : first;
      expected.keys = expect.keys;
    }
    if (expect.text !== undefined) {
      observed.text = text;
      expected.text = expect.text;
    }
    if (expect.headers) {
      const seen: Record<string, unknown> = {};
      for (const [name, want] of Object.entries(expect.headers)) {
        const got = res.headers.get(name);
        seen[name] = want instanceof RegExp && got !== null && want.test(got) ? want : got;
      }
      observed.headers = seen;
      expected.headers = expect.headers;
    }
    if (expect.prefs) {
      const applied = res.headers.get("preference-applied");
      observed.prefs =
        applied === null
          ? null
          : applied
              .split(",")
              .map((p) => p.trim())
              .sort();
      expected.prefs = [...expect.prefs].sort();
    }
    if (expect.derive) {
      observed.derived = json === undefined ? text : expect.derive(json);
      expected.derived = expect.derived;
    }
    assert.deepEqual(observed, expected, `${req.method ?? "GET"} ${req.path}\n${text.slice(0, 2000)}`);
  }

  async function seed(method: "POST" | "PATCH", path: string, body: unknown, status: number) {
    const res = await send({ method, path, body, headers: { Prefer: "return=minimal" } });
    assert.equal(res.status, status, `${method} ${path}: ${await res.text()}`);
  }

  before(async () => {
    app = await startApp(t());
    ({ keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } }));
    const client = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({
      email: `grammar-${randomUUID().slice(0, 8)}@example.com`,
      password: PASSWORD,
    });
    assert.equal(error, null);
    assert.ok(data.session, "sign-up without confirmation returns a session");
    tokens.user = data.session.access_token;

    const claims = decodeJwt(tokens.user);
    const tenantId = String(claims.tenant_id);
    const secret = await getTenantSigningSecret(t().db, tenantId);
    assert.ok(secret);
    const now = Math.floor(Date.now() / 1000);
    tokens.expired = await new SignJWT({ ...claims, iat: now - 7200, exp: now - 3600 })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(new TextEncoder().encode(secret));
    tokens["bad-signature"] = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(new TextEncoder().encode("not-the-tenant-secret-not-the-tenant-secret"));

    // The catalog, through /rest/v1 as the user.
    await seed("POST", "/artist_profiles", ARTISTS, 201);
    await seed("POST", "/releases", RELEASES, 201);
    await seed("POST", "/tracks", TRACKS, 201);
    await seed("PATCH", `/releases?id=eq.${R4}`, { status: "submitted" }, 204);

    // Analytics, as the operator's imports write them.
    await t().db.asService(async (tx) => {
      const releaseRows: [number, string, string, number][] = [
        [1, R1, "spotify", 1000],
        [2, R1, "deezer", 250],
        [3, R2, "spotify", 40],
      ];
      for (const [n, releaseId, store, streams] of releaseRows) {
        await tx.query(
          `insert into public.release_analytics (id, release_id, account_id, period_start, period_end, store, streams, revenue, currency)
           select $1, r.id, r.account_id, '2024-01-01', '2024-01-31', $3, $4::bigint, $4::bigint * 0.004, 'EUR'
           from public.releases r where r.id = $2`,
          [uuid("dddddddd", n), releaseId, store, streams],
        );
      }
      const trackRows: [number, string, string, number][] = [
        [1, T1, "spotify", 600],
        [2, T2, "spotify", 400],
        [3, T1, "deezer", 100],
      ];
      for (const [n, trackId, store, streams] of trackRows) {
        await tx.query(
          `insert into public.track_analytics (id, track_id, release_id, account_id, period_start, period_end, store, streams, revenue, currency)
           select $1, tr.id, tr.release_id, tr.account_id, '2024-01-01', '2024-01-31', $3, $4::bigint, $4::bigint * 0.004, 'EUR'
           from public.tracks tr where tr.id = $2`,
          [uuid("eeeeeeee", n), trackId, store, streams],
        );
      }
    });
  });

  after(async () => {
    await app?.close();
  });

  test("the table names every case once", () => {
    const names = CASES.map((c) => c.name);
    assert.deepEqual(
      names.filter((n, i) => names.indexOf(n) !== i),
      [],
    );
  });

  for (const c of CASES) {
    test(c.name, async () => {
      await check(c.req, c.expect);
      if (c.followUp) await check(c.followUp.req, c.followUp.expect);
    });
  }
});
