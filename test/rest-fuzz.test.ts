import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, type TestContext, test } from "node:test";
import fc from "fast-check";
import { FILTER_OPS } from "../src/rest/ast.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine, type TestDb } from "./support/db.ts";
import { EXPOSED_TABLES, seedAccount, seedUser } from "./support/seed.ts";

/**
 * Property tests of /rest/v1 with fast-check: random and hostile query strings, headers and
 * bodies, thrown at the exposed tables and at tables that do not exist, as a signed-up user.
 * Whatever arrives:
 *
 * - the answer is never 5xx, and never comes late (no hang);
 * - an answer that is not 2xx is PostgREST's error object {code, message, details, hint};
 * - the server never builds SQL PostgreSQL cannot parse (42601 is never the client's fault);
 * - no answer, body or header, carries anything of another account's rows (another account of
 *   the same tenant, and an account of another tenant, both seeded on the service path).
 *
 * Runs are bounded (fixed seed, numRuns, a time limit per property). The properties run on PGlite
 * unless TEST_ENGINES names the engines; FUZZ_SEED and FUZZ_RUNS_SCALE change the seed and the
 * number of runs. A corpus of hostile requests the fuzzing found (or that it cannot reach, such
 * as megabyte bodies) runs on every engine, with what PostgREST answers.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20260918);
const SCALE = Number(process.env.FUZZ_RUNS_SCALE ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));
/** Per property; the whole file stays well under a minute per engine. */
const TIME_LIMIT_MS = 20_000;
/** A request slower than this is a hang. */
const SLOW_MS = 5_000;

const TABLES = EXPOSED_TABLES;
type Table = (typeof TABLES)[number];

/** The relationships between the exposed tables, and whether each is to-one from the left side. */
const RELATIONS: Record<Table, { target: Table; toOne: boolean }[]> = {
  artist_profiles: [{ target: "releases", toOne: false }],
  releases: [
    { target: "artist_profiles", toOne: true },
    { target: "tracks", toOne: false },
    { target: "takedown_requests", toOne: false },
    { target: "release_analytics", toOne: false },
    { target: "media_assets", toOne: false },
  ],
  tracks: [
    { target: "releases", toOne: true },
    { target: "track_analytics", toOne: false },
    { target: "media_assets", toOne: false },
  ],
  takedown_requests: [{ target: "releases", toOne: true }],
  release_analytics: [{ target: "releases", toOne: true }],
  track_analytics: [{ target: "tracks", toOne: true }],
  notifications: [],
  media_assets: [
    { target: "releases", toOne: true },
    { target: "tracks", toOne: true },
  ],
};

const UNKNOWN_TABLES = [
  "users",
  "api_keys",
  "tenants",
  "jobs",
  "events",
  "internal.users",
  "pg_catalog.pg_authid",
  "pg_user",
  "information_schema.tables",
  "Releases",
  "RELEASES",
  "releases ",
  "releases%00",
  "%72eleases",
  "releases%3Bselect%201",
  "releases%22",
  "releases%2Fx",
  "release_history",
  "schema_migrations",
  "rate_limits",
];

/** Pieces hostile strings are made of: the grammar's own punctuation, quoting, encodings, unicode. */
const PIECES = [
  "(",
  ")",
  '"',
  "'",
  "\\",
  ",",
  ".",
  ":",
  "::",
  "*",
  "!",
  "{",
  "}",
  "[",
  "]",
  "%",
  ";",
  "-",
  "->",
  "->>",
  ">",
  "<",
  "=",
  "&",
  "#",
  "+",
  "?",
  "/",
  " ",
  "\t",
  "\n",
  "\r",
  "\u0000",
  "é",
  "ß",
  "Ж",
  "中",
  "😀",
  "\u202e",
  "\ufeff",
  "\ud800",
  "\udfff",
  "%00",
  "%zz",
  "%C3%28",
  "%FF",
  "%2C",
  "%22",
  "%5C",
  "%25",
  "%E2%82",
  "not.",
  "eq.",
  "in.",
  "is.",
  "or(",
  "and(",
  "not.or(",
  "null",
  "true",
  "NaN",
  "-Infinity",
  "1e309",
  "-1",
  "0",
  "9223372036854775808",
  "' or '1'='1",
  '"; drop table public.releases; --',
  "$1",
  "$$",
  "pg_sleep(10)",
  "select",
  "order",
  "limit",
  "id",
  "title",
];

interface Party {
  userId: string;
  accountId: string;
  marker: string;
  ids: Record<Table, string[]>;
}

interface Observed {
  method: string;
  url: string;
  status: number;
  ms: number;
  headers: [string, string][];
  text: string;
}

/** Percent-encodes every byte of the UTF-8 form but the unreserved characters (a lone surrogate becomes U+FFFD). */
function pct(s: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(s)) {
    const ch = String.fromCharCode(b);
    out += /[A-Za-z0-9_.~-]/.test(ch) ? ch : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** `s` percent-encoded, cut (by whole characters) to at most 90 characters. */
function fitPath(s: string): string {
  let out = "";
  for (const ch of s) {
    const next = out + pct(ch);
    if (next.length > 90) break;
    out = next;
  }
  return out;
}

/** Every row of the exposed tables for one account, written on the service path as the operator would. */
async function seedRows(t: TestDb, accountId: string, userId: string, marker: string): Promise<Party> {
  return t.db.asService(async (tx) => {
    const one = async (sql: string, params: unknown[]) =>
      ((await tx.query<{ id: string }>(sql, params)).rows[0] as { id: string }).id;
    const artist = await one(
      `insert into public.artist_profiles (account_id, name, bio, "streamingA_id", "streamingB_id", created_by, store_ids)
       values ($1, $2, $2, $2, $2, $3, jsonb_build_object('deezer', $2::text)) returning id`,
      [accountId, `${marker} artist`, userId],
    );
    const draft = await one(
      `insert into public.releases (account_id, artist_id, title, release_date, status, created_by, genres)
       values ($1, $2, $3, '2026-09-18', 'draft', $4, array['pop', $3]) returning id`,
      [accountId, artist, `${marker} draft`, userId],
    );
    const delivered = await one(
      `insert into public.releases (account_id, artist_id, title, release_date, status, created_by, upc)
       values ($1, $2, $3, '2026-05-01', 'delivered', $4, '4006381333931') returning id`,
      [accountId, artist, `${marker} delivered`, userId],
    );
    const t1 = await one(
      `insert into public.tracks (release_id, account_id, title, isrc, duration, track_number, created_by)
       values ($1, $2, $3, 'QZCCC2600001', 201, 1, $4) returning id`,
      [draft, accountId, `${marker} one`, userId],
    );
    const t2 = await one(
      `insert into public.tracks (release_id, account_id, title, isrc, duration, track_number, created_by)
       values ($1, $2, $3, 'QZCCC2600002', 202, 1, $4) returning id`,
      [delivered, accountId, `${marker} two`, userId],
    );
    const takedown = await one(
      `insert into public.takedown_requests (release_id, account_id, reason, created_by)
       values ($1, $2, $3, $4) returning id`,
      [delivered, accountId, `${marker} reason`, userId],
    );
    const ra = await one(
      `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, streams, revenue, currency)
       values ($1, $2, '2026-06-01', '2026-06-30', $3, 100, 1.5, 'EUR') returning id`,
      [delivered, accountId, marker],
    );
    const ta = await one(
      `insert into public.track_analytics (track_id, release_id, account_id, period_start, period_end, store, streams, currency)
       values ($1, $2, $3, '2026-06-01', '2026-06-30', $4, 90, 'EUR') returning id`,
      [t2, delivered, accountId, marker],
    );
    const n = await one(
      `insert into public.notifications (user_id, account_id, kind, title, body, data)
       values ($1, $2, 'release.approved', $3, $3, jsonb_build_object('release_id', $4::text)) returning id`,
      [userId, accountId, `${marker} notice`, delivered],
    );
    // The draft's cover, checked, and its track's audio, still waiting for its bytes.
    const artwork = await one(
      `insert into public.media_assets (release_id, kind, filename, content_type, max_bytes, upload_expires_at,
         status, bytes, sha256, metadata, uploaded_at, validated_at, created_by)
       values ($1, 'artwork', $2, 'image/jpeg', 52428800, now() + interval '1 hour', 'valid', 105886,
         repeat('a', 64), jsonb_build_object('width', 3000, 'height', 3000, 'format', 'jpeg'), now(), now(), $3)
       returning id`,
      [draft, `${marker}.jpg`, userId],
    );
    const audio = await one(
      `insert into public.media_assets (release_id, track_id, kind, filename, content_type, max_bytes,
         upload_expires_at, created_by)
       values ($1, $2, 'audio', $3, 'audio/wav', 1073741824, now() + interval '1 hour', $4) returning id`,
      [draft, t1, `${marker}.wav`, userId],
    );
    return {
      userId,
      accountId,
      marker,
      ids: {
        artist_profiles: [artist],
        releases: [draft, delivered],
        tracks: [t1, t2],
        takedown_requests: [takedown],
        release_analytics: [ra],
        track_analytics: [ta],
        notifications: [n],
        media_assets: [artwork, audio],
      },
    };
  });
}

describeEachEngine("rest fuzz: hostile requests at /rest/v1", (t) => {
  let app: RunningApp;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;
  let token: string;
  /** The fuzzing user's own rows. */
  let me: Party;
  /** Another account of the same tenant, and an account of another tenant. */
  let victims: Party[];
  let columns: Record<Table, { name: string; type: string }[]>;
  let before0: unknown;

  /** Properties run on PostgreSQL only when TEST_ENGINES asks for it (the corpus runs on both engines). */
  function skipped(ctx: TestContext): boolean {
    if (t().kind === "postgres" && !process.env.TEST_ENGINES) {
      ctx.skip("properties run on PGlite unless TEST_ENGINES names postgres");
      return true;
    }
    return false;
  }

  async function victimSnapshot(): Promise<unknown> {
    return t().db.asService(async (tx) => {
      const out: Record<string, unknown> = {};
      for (const v of victims) {
        for (const table of TABLES) {
          const owner = table === "notifications" ? "user_id" : "account_id";
          out[`${v.marker}.${table}`] = (
            await tx.query<{ r: unknown }>(
              `select to_jsonb(x) as r from public.${table} x where ${owner} = $1 order by id`,
              [table === "notifications" ? v.userId : v.accountId],
            )
          ).rows.map((x) => x.r);
        }
      }
      return out;
    });
  }

  const secretsOf = (p: Party) => [p.marker, p.userId, p.accountId, ...Object.values(p.ids).flat()];

  before(async () => {
    app = await startApp(t());
    const t1 = await tenantWithKeys(t(), { auth: { email_confirmation: false }, settings: UNLIMITED });
    const t2 = await tenantWithKeys(t(), { auth: { email_confirmation: false }, settings: UNLIMITED });
    keys = t1.keys;
    otherKeys = t2.keys;

    // The fuzzing user signs up over HTTP and gets a personal account.
    const res = await fetch(`${app.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({
        email: `fuzz-${randomUUID().slice(0, 8)}@example.com`,
        password: "Correct-Horse-7",
      }),
    });
    assert.equal(res.status, 200);
    const session = (await res.json()) as { access_token: string; user: { id: string } };
    token = session.access_token;
    const [membership] = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ account_id: string }>(
            "select account_id from internal.memberships where user_id = $1",
            [session.user.id],
          )
        ).rows,
    );
    assert.ok(membership);
    me = await seedRows(t(), membership.account_id, session.user.id, `mine${randomUUID().slice(0, 6)}`);

    victims = [];
    for (const tenant of [t1.tenant, t2.tenant]) {
      const account = await seedAccount(t().db, tenant, "Victim label");
      const user = await seedUser(t().db, tenant, [{ account, role: "owner" }]);
      victims.push(await seedRows(t(), account.id, user.id, `victim${randomUUID().slice(0, 8)}`));
    }

    const cols = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ table_name: Table; name: string; type: string }>(
            `select c.relname as table_name, a.attname as name, t.typname as type
             from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
             join pg_type t on t.oid = a.atttypid
             where n.nspname = 'public' and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped
             order by c.relname, a.attnum`,
          )
        ).rows,
    );
    columns = {} as typeof columns;
    for (const tb of TABLES) columns[tb] = cols.filter((c) => c.table_name === tb);
    before0 = await victimSnapshot();
  });
  after(async () => {
    await app?.close();
  });

  // ---------------------------------------------------------------------------------------------
  // Sending, and the invariants every answer keeps

  async function send(
    method: string,
    pathAndQuery: string,
    init: { headers?: Record<string, string>; body?: string; auth?: "user" | "none" } = {},
  ): Promise<Observed> {
    const url = `${app.url}/rest/v1/${pathAndQuery}`;
    const started = performance.now();
    const res = await fetch(url, {
      method,
      headers: {
        apikey: keys.anon_key,
        ...(init.auth === "none" ? {} : { authorization: `Bearer ${token}` }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: AbortSignal.timeout(SLOW_MS * 2),
    });
    const text = await res.text();
    return {
      method,
      url: url.slice(0, 2000),
      status: res.status,
      ms: performance.now() - started,
      headers: [...res.headers.entries()],
      text,
    };
  }

  const show = (o: Observed) => `${o.method} ${o.url}\n-> ${o.status} ${o.text.slice(0, 500)}`;

  /** The invariants of every answer; `visible` are parties the caller may legitimately see. */
  function invariants(o: Observed, visible: Party[] = []): void {
    assert.ok(o.status < 500, `5xx: ${show(o)}`);
    assert.ok(o.ms < SLOW_MS, `took ${Math.round(o.ms)} ms: ${show(o)}`);
    if ((o.status < 200 || o.status > 299) && o.method !== "HEAD") {
      const type = o.headers.find(([k]) => k === "content-type")?.[1] ?? "";
      assert.match(type, /^application\/json/, `error content-type ${type}: ${show(o)}`);
      let body: unknown;
      assert.doesNotThrow(
        () => {
          body = JSON.parse(o.text);
        },
        `error body is not JSON: ${show(o)}`,
      );
      assert.ok(body !== null && typeof body === "object" && !Array.isArray(body), `error body: ${show(o)}`);
      const e = body as Record<string, unknown>;
      // A missing or unknown apikey is the gateway's answer, as Supabase's: {message, hint}, no code
      // (docs/errors.md); everything past the gateway answers in PostgREST's shape.
      if (o.status === 401 && Object.keys(e).sort().join() === "hint,message") {
        assert.match(String(e.message), /^(No API key found in request|Invalid API key)$/, show(o));
      } else {
        assert.deepEqual(Object.keys(e).sort(), ["code", "details", "hint", "message"], show(o));
        assert.equal(typeof e.code, "string", show(o));
        assert.equal(typeof e.message, "string", show(o));
        assert.ok(e.details === null || typeof e.details === "string", show(o));
        assert.ok(e.hint === null || typeof e.hint === "string", show(o));
        // Every value is a bind parameter and every name is checked: a syntax error is the server's own.
        assert.notEqual(e.code, "42601", `the server built invalid SQL: ${show(o)}`);
      }
    }
    const everything = `${o.text}\n${o.headers.map(([k, v]) => `${k}: ${v}`).join("\n")}`;
    for (const v of victims) {
      if (visible.includes(v)) continue;
      for (const s of secretsOf(v)) {
        assert.ok(!everything.includes(s), `another account's ${s} in the answer: ${show(o)}`);
      }
    }
  }

  async function check<Ts>(prop: fc.IAsyncProperty<Ts>, numRuns: number): Promise<void> {
    await fc.assert(prop, {
      numRuns: runs(numRuns),
      seed: SEED,
      interruptAfterTimeLimit: TIME_LIMIT_MS,
      markInterruptAsFailure: false,
      endOnFailure: false,
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Arbitraries

  const allColumns = () => [...new Set(TABLES.flatMap((tb) => columns[tb].map((c) => c.name)))];

  const hostile = () =>
    fc.oneof(
      { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom(...PIECES), maxLength: 12 }) },
      { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
      { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
      {
        weight: 1,
        arbitrary: fc.string({ unit: fc.constantFrom(...PIECES), minLength: 200, maxLength: 600 }),
      },
      { weight: 1, arbitrary: fc.string({ minLength: 1000, maxLength: 3000 }) },
    );

  const operand = () =>
    fc.oneof(
      { weight: 3, arbitrary: hostile() },
      { weight: 2, arbitrary: fc.uuid().map(String) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(...me.ids.releases, ...me.ids.tracks, me.accountId, me.userId),
      },
      { weight: 1, arbitrary: fc.integer().map(String) },
      { weight: 1, arbitrary: fc.double().map(String) },
      {
        weight: 1,
        arbitrary: fc
          .date({ min: new Date("0001-01-01"), max: new Date("9999-12-31"), noInvalidDate: true })
          .map((d) => d.toISOString().slice(0, 10)),
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "null",
          "not_null",
          "true",
          "false",
          "unknown",
          "{}",
          "{a,b}",
          '{"a":1}',
          "[1,2]",
          "(1,2)",
          '"a,b"',
          '"a\\"b"',
          "[2020-01-01,2021-01-01)",
          "*a*",
          "%",
          "_",
          "(a*)*b",
          "\\",
        ),
      },
    );

  const opName = () =>
    fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...FILTER_OPS) },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "eq(any)",
          "neq(all)",
          "like(any)",
          "ilike(all)",
          "gt(any)",
          "fts(english)",
          "plfts(simple)",
          "wfts(xx)",
          "phfts(english",
          "eq()",
          "in",
          "not",
          "foo",
          "",
          "EQ",
          "is",
        ),
      },
      { weight: 1, arbitrary: hostile() },
    );

  const fieldName = () =>
    fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...allColumns()) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(
            fc.constantFrom(...allColumns()),
            fc.array(fc.tuple(fc.constantFrom("->", "->>"), fc.oneof(fc.nat(5).map(String), hostile())), {
              maxLength: 3,
            }),
          )
          .map(([c, path]) => `${c}${path.map(([op, k]) => `${op}${k}`).join("")}`),
      },
      { weight: 1, arbitrary: hostile() },
    );

  const filterValue = () =>
    fc.oneof(
      {
        weight: 5,
        arbitrary: fc
          .tuple(fc.boolean(), opName(), operand())
          .map(([neg, op, v]) => `${neg ? "not." : ""}${op}.${v}`),
      },
      {
        weight: 1,
        arbitrary: fc.array(operand(), { maxLength: 6 }).map((vs) => `in.(${vs.join(",")})`),
      },
      { weight: 1, arbitrary: hostile() },
    );

  /** A logic tree: `(a.eq.1,and(b.gt.2,not.or(c.is.null)))`, sometimes nested deeply. */
  const logicTree = () => {
    const { node } = fc.letrec<{ node: string; leaf: string; group: string }>((tie) => ({
      node: fc.oneof({ depthSize: "small", maxDepth: 6 }, tie("leaf"), tie("group")),
      leaf: fc.tuple(fieldName(), filterValue()).map(([f, v]) => `${f}.${v}`),
      group: fc
        .tuple(fc.constantFrom("and", "or", "not.and", "not.or"), fc.array(tie("node"), { maxLength: 4 }))
        .map(([k, xs]) => `${k}(${xs.join(",")})`),
    }));
    return fc.oneof(
      { weight: 6, arbitrary: fc.array(node, { maxLength: 4 }).map((xs) => `(${xs.join(",")})`) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.integer({ min: 1, max: 80 }), fc.constantFrom("or", "and", "not.or"))
          .map(([depth, k]) => `(id.eq.1,${`${k}(id.is.null,`.repeat(depth)}title.eq.x${")".repeat(depth)})`),
      },
      { weight: 1, arbitrary: hostile() },
    );
  };

  /** A select list: columns, aliases, casts, JSON paths, embeds with hints, !inner and spreads. */
  const selectList = () => {
    const { list } = fc.letrec<{ list: string; item: string }>((tie) => ({
      list: fc.array(tie("item"), { minLength: 1, maxLength: 4 }).map((xs) => xs.join(",")),
      item: fc.oneof(
        { depthSize: "small", maxDepth: 4 },
        fc.constant("*"),
        fieldName(),
        fc.tuple(hostile(), fieldName()).map(([a, f]) => `${a}:${f}`),
        fc
          .tuple(
            fieldName(),
            fc.constantFrom(
              "text",
              "int",
              "json",
              "uuid",
              "date",
              "bool",
              "numeric",
              "int[]",
              "regclass",
              "x",
            ),
          )
          .map(([f, cast]) => `${f}::${cast}`),
        fc
          .tuple(
            fc.constantFrom("", "..."),
            fc.oneof(fc.constantFrom(...TABLES), hostile()),
            fc.constantFrom(
              "",
              "!inner",
              "!left",
              "!releases_artist_id_account_id_fkey",
              "!x!y!z",
              "!account_id",
            ),
            tie("list"),
          )
          .map(([spread, rel, hint, inner]) => `${spread}${rel}${hint}(${inner})`),
        fc.constantFrom("count()", "id.count()", "sum(duration)", "*,", ",", "()", "(*)", "a:b:c"),
      ),
    }));
    return fc.oneof(
      { weight: 6, arbitrary: list },
      {
        weight: 1,
        arbitrary: fc
          .integer({ min: 1, max: 60 })
          .map((depth) => `id,${"releases(id,tracks(id,".repeat(depth)}id${"))".repeat(depth)}`),
      },
      { weight: 1, arbitrary: hostile() },
    );
  };

  const orderValue = () =>
    fc.oneof(
      {
        weight: 4,
        arbitrary: fc
          .array(
            fc
              .tuple(
                fieldName(),
                fc.constantFrom(
                  "",
                  ".asc",
                  ".desc",
                  ".nullsfirst",
                  ".desc.nullslast",
                  ".up",
                  ".asc.desc",
                  ".",
                ),
              )
              .map(([f, d]) => `${f}${d}`),
            { minLength: 1, maxLength: 3 },
          )
          .map((xs) => xs.join(",")),
      },
      { weight: 1, arbitrary: hostile() },
    );

  const embedPrefix = () =>
    fc.oneof(
      fc.constantFrom(...TABLES).map((tb) => `${tb}.`),
      fc.constantFrom("tracks.releases.", "releases.tracks.", "not.", "x.y.z."),
      hostile().map((h) => `${h}.`),
    );

  /** One query parameter, as [key, value]. */
  const entry = () =>
    fc.oneof(
      { weight: 6, arbitrary: fc.tuple(fieldName(), filterValue()) },
      {
        weight: 2,
        arbitrary: fc.tuple(
          fc.oneof(
            fc.constantFrom("or", "and", "not.or", "not.and"),
            embedPrefix().map((p) => `${p}or`),
          ),
          logicTree(),
        ),
      },
      { weight: 3, arbitrary: fc.tuple(fc.constant("select"), selectList()) },
      {
        weight: 2,
        arbitrary: fc.tuple(
          fc.oneof(
            fc.constant("order"),
            embedPrefix().map((p) => `${p}order`),
          ),
          orderValue(),
        ),
      },
      {
        weight: 2,
        arbitrary: fc.tuple(
          fc.oneof(
            fc.constantFrom("limit", "offset"),
            embedPrefix().map((p) => `${p}limit`),
          ),
          fc.oneof(
            fc.nat(1000).map(String),
            fc.constantFrom("-1", "1.5", "", "1e3", "99999999999999999999"),
            hostile(),
          ),
        ),
      },
      {
        weight: 1,
        arbitrary: fc.tuple(
          fc.constantFrom("on_conflict", "columns"),
          fc.oneof(
            fc
              .array(fc.constantFrom(...allColumns()), { minLength: 1, maxLength: 4 })
              .map((xs) => xs.join(",")),
            hostile(),
          ),
        ),
      },
      {
        weight: 1,
        arbitrary: fc.tuple(
          embedPrefix().map((p) => `${p}id`),
          filterValue(),
        ),
      },
      { weight: 1, arbitrary: fc.tuple(hostile(), hostile()) },
      {
        weight: 1,
        arbitrary: fc.tuple(fc.constant("apikey"), fc.constantFrom(keys.anon_key, otherKeys.anon_key, "x")),
      },
    );

  /** The query string: each parameter percent-encoded, or raw, or raw with broken escapes. */
  const queryString = () =>
    fc
      .array(
        fc.tuple(entry(), fc.constantFrom<"encoded" | "raw" | "half">("encoded", "encoded", "raw", "half")),
        { maxLength: 6 },
      )
      .map((entries) =>
        entries
          .map(([[k, v], how]) => {
            if (how === "encoded") return `${pct(k)}=${pct(v)}`;
            if (how === "raw") return `${k}=${v}`;
            return `${pct(k)}=${v.replace(/[ #&]/g, (ch) => pct(ch))}`;
          })
          .join("&")
          // Within what an HTTP request line may carry (Node's 16 KiB header limit).
          .slice(0, 6000),
      );

  const tablePath = () =>
    fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom<string>(...TABLES) },
      { weight: 1, arbitrary: fc.constantFrom(...UNKNOWN_TABLES) },
      // Encoded, and short enough for the router's parameter limit (a corpus test covers longer ones).
      { weight: 1, arbitrary: hostile().map((h) => fitPath(h) || "x") },
    );

  const ascii = (max: number) =>
    fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: max,
    });

  const headers = () =>
    fc.record(
      {
        prefer: fc
          .array(
            fc.oneof(
              {
                weight: 4,
                arbitrary: fc.constantFrom(
                  "return=representation",
                  "return=minimal",
                  "return=headers-only",
                  "return=x",
                  "count=exact",
                  "count=planned",
                  "count=estimated",
                  "count=",
                  "resolution=merge-duplicates",
                  "resolution=ignore-duplicates",
                  "missing=default",
                  "tx=rollback",
                  "tx=commit",
                  "handling=strict",
                  "handling=lenient",
                  "max-affected=0",
                  "max-affected=1",
                  "max-affected=-1",
                  "max-affected=99999999999999999999",
                  "params=single-object",
                  "timezone=Europe/Lisbon",
                  'return="representation"',
                ),
              },
              { weight: 1, arbitrary: ascii(40) },
            ),
            { maxLength: 5 },
          )
          .chain((xs) => fc.constantFrom(", ", ",", " ; ").map((sep) => xs.join(sep))),
        accept: fc.oneof(
          {
            weight: 4,
            arbitrary: fc.constantFrom(
              "application/json",
              "application/vnd.pgrst.object+json",
              "application/vnd.pgrst.object",
              "application/vnd.pgrst.object+json;nulls=stripped",
              "application/vnd.pgrst.plan+json",
              "text/csv",
              "*/*",
              "application/*",
              "text/html",
              "application/xml",
              "application/geo+json",
              "application/openapi+json",
              "text/csv, application/json;q=0.5",
              "application/json;q=0",
              "",
            ),
          },
          { weight: 1, arbitrary: ascii(60) },
        ),
        range: fc.oneof(
          {
            weight: 3,
            arbitrary: fc
              .tuple(fc.nat(50), fc.option(fc.nat(60)))
              .map(([from, to]) => `${from}-${to === null ? "" : to}`),
          },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              "items=0-0",
              "0-",
              "-5",
              "a-b",
              "0-1,3-4",
              "bytes=0-1",
              "99999999999999999999-",
              "9007199254740993-9007199254740999",
              "5-1",
              " 0 - 1 ",
            ),
          },
          { weight: 1, arbitrary: ascii(30) },
        ),
        "range-unit": fc.constantFrom("items", "bytes", "x"),
        "accept-profile": fc.constantFrom("public", "internal", "auth", "pg_catalog", "", "PUBLIC"),
        "content-profile": fc.constantFrom("public", "internal", "auth"),
      },
      { requiredKeys: [] },
    );

  /** JSON bodies: rows with the table's columns (and others), arrays of them, any JSON, broken JSON. */
  const body = () => {
    const leaf = fc.oneof(
      hostile(),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.uuid().map(String),
      fc.constantFrom(...me.ids.releases, me.ids.artist_profiles[0] as string, me.accountId, me.userId),
      fc.constantFrom(
        "2026-01-01",
        "draft",
        "submitted",
        "live",
        "pending",
        "completed",
        "EUR",
        "QZCCC2600009",
      ),
    );
    const value = fc.oneof(
      { weight: 4, arbitrary: leaf },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
      { weight: 1, arbitrary: fc.array(leaf, { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), leaf, { maxKeys: 3 }) },
    );
    const row = fc.dictionary(
      fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(...allColumns()) },
        { weight: 1, arbitrary: hostile() },
        { weight: 1, arbitrary: fc.constantFrom("__proto__", "constructor", "prototype") },
      ),
      value,
      { maxKeys: 6 },
    );
    return fc.oneof(
      { weight: 5, arbitrary: row.map((r) => JSON.stringify(r)) },
      { weight: 2, arbitrary: fc.array(row, { maxLength: 4 }).map((r) => JSON.stringify(r)) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? "null") },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "",
          " ",
          "{",
          "[",
          "null",
          "[]",
          "{}",
          "[{}]",
          "[{},[]]",
          '{"a":1}{"b":2}',
          '{"title":"\\u0000"}',
          '{"title":"\\ud800"}',
          '{"__proto__":{"admin":true}}',
          '{"constructor":{"prototype":{"x":1}}}',
          "1e309",
          '"string"',
          "\u0000",
          `[${"[".repeat(5000)}${"]".repeat(5000)}]`,
          `{"title":"${"x".repeat(100_000)}"}`,
        ),
      },
      { weight: 1, arbitrary: hostile() },
    );
  };

  const contentType = () =>
    fc.constantFrom(
      "application/json",
      "application/json",
      "application/json",
      "application/json; charset=utf-8",
      "application/json; charset=latin1",
      "application/vnd.pgrst.object+json",
      "text/plain",
      "text/csv",
      "application/x-www-form-urlencoded",
      "application/octet-stream",
      "multipart/form-data; boundary=x",
      "",
    );

  // ---------------------------------------------------------------------------------------------
  // Properties

  test("property: hostile query strings never break the server nor reveal another account", async (ctx) => {
    if (skipped(ctx)) return;
    await check(
      fc.asyncProperty(
        fc.constantFrom("GET", "GET", "GET", "HEAD", "DELETE", "PATCH"),
        tablePath(),
        queryString(),
        fc.boolean(),
        async (method, table, query, rollback) => {
          // Writes roll back half the time, so the user's rows stay for the reads that follow.
          const o = await send(method, `${table}?${query}`, {
            headers: {
              ...(method === "PATCH" ? { "content-type": "application/json" } : {}),
              ...(rollback && method !== "GET" && method !== "HEAD" ? { prefer: "tx=rollback" } : {}),
            },
            ...(method === "PATCH" ? { body: JSON.stringify({ title: "fuzzed" }) } : {}),
          });
          invariants(o);
        },
      ),
      300,
    );
    assert.deepEqual(await victimSnapshot(), before0, "another account's rows are unchanged");
  });

  test("property: random Prefer, Accept, Range and profile headers", async (ctx) => {
    if (skipped(ctx)) return;
    await check(
      fc.asyncProperty(
        fc.constantFrom("GET", "HEAD", "POST", "PATCH", "DELETE", "PUT"),
        tablePath(),
        fc.oneof(
          queryString(),
          fc.constantFrom("", "select=*", "select=*,tracks(*)", `id=eq.${randomUUID()}`, "order=id&limit=1"),
        ),
        headers(),
        async (method, table, query, hdrs) => {
          const write = method !== "GET" && method !== "HEAD";
          const o = await send(method, `${table}?${query}`, {
            headers: { ...hdrs, ...(write ? { "content-type": "application/json" } : {}) },
            ...(write ? { body: JSON.stringify({ title: "fuzzed", name: "fuzzed" }) } : {}),
          });
          invariants(o);
        },
      ),
      250,
    );
    assert.deepEqual(await victimSnapshot(), before0, "another account's rows are unchanged");
  });

  test("property: random JSON bodies for POST, PATCH and PUT", async (ctx) => {
    if (skipped(ctx)) return;
    await check(
      fc.asyncProperty(
        fc.constantFrom("POST", "POST", "PATCH", "PUT", "DELETE"),
        tablePath(),
        fc.oneof(
          { weight: 3, arbitrary: fc.constant("") },
          {
            weight: 2,
            arbitrary: fc
              .tuple(
                fc.constantFrom("id", "release_id", "artist_id"),
                fc.constantFrom(...me.ids.releases, ...me.ids.tracks, randomUUID()),
              )
              .map(([k, v]) => `${k}=eq.${v}`),
          },
          {
            weight: 1,
            arbitrary: fc.constantFrom("on_conflict=id", "select=*,releases(*)", "columns=title,release_id"),
          },
          { weight: 1, arbitrary: queryString() },
        ),
        body(),
        contentType(),
        fc.constantFrom(
          "return=representation",
          "return=minimal",
          "return=representation,resolution=merge-duplicates",
          "resolution=ignore-duplicates,return=representation",
          "missing=default,return=representation",
          "tx=rollback,return=representation",
          "",
        ),
        async (method, table, query, payload, type, prefer) => {
          const o = await send(method, `${table}?${query}`, {
            headers: { ...(type ? { "content-type": type } : {}), ...(prefer ? { prefer } : {}) },
            body: payload,
          });
          invariants(o);
        },
      ),
      250,
    );
    assert.deepEqual(await victimSnapshot(), before0, "another account's rows are unchanged");
  });

  test("property: the gateway under hostile keys and tokens answers 401 in PostgREST's shape", async (ctx) => {
    if (skipped(ctx)) return;
    const tokens = [
      token,
      keys.anon_key,
      keys.service_role_key,
      otherKeys.anon_key,
      otherKeys.service_role_key,
    ];
    await check(
      fc.asyncProperty(
        fc.oneof(fc.constantFrom(...tokens), ascii(80), fc.constant(`${token.slice(0, -3)}abc`)),
        fc.oneof(fc.constantFrom(...tokens), ascii(80), fc.constant(`${token}.x`), fc.constant("")),
        fc.constantFrom("Bearer ", "bearer ", "Basic ", "", "Bearer  "),
        tablePath(),
        async (apikey, bearer, scheme, table) => {
          const res = await fetch(`${app.url}/rest/v1/${table}`, {
            headers: { apikey, authorization: `${scheme}${bearer}` },
            signal: AbortSignal.timeout(SLOW_MS * 2),
          });
          const o: Observed = {
            method: "GET",
            url: `${table} apikey=${apikey.slice(0, 20)} authorization=${scheme}${bearer.slice(0, 20)}`,
            status: res.status,
            ms: 0,
            headers: [...res.headers.entries()],
            text: await res.text(),
          };
          // A tenant's service key sees that tenant's accounts; nothing else sees another account.
          const tenantOf = (k: string) =>
            [token, keys.anon_key, keys.service_role_key].includes(k)
              ? 1
              : [otherKeys.anon_key, otherKeys.service_role_key].includes(k)
                ? 2
                : 0;
          const hasBearer = /^bearer\s+\S+\s*$/i.test(`${scheme}${bearer}`);
          const visible =
            hasBearer && bearer === keys.service_role_key && tenantOf(apikey) === 1
              ? [victims[0] as Party]
              : hasBearer && bearer === otherKeys.service_role_key && tenantOf(apikey) === 2
                ? [victims[1] as Party]
                : [];
          invariants(o, visible);
          if (o.status >= 200 && o.status < 300) {
            assert.ok(hasBearer && tenantOf(apikey) !== 0, `no key or no token, yet ${show(o)}`);
            assert.equal(
              tenantOf(bearer),
              tenantOf(apikey),
              `a token of one tenant with the other's key: ${show(o)}`,
            );
            assert.ok(
              ![keys.anon_key, otherKeys.anon_key].includes(bearer),
              `the anon key reads rows: ${show(o)}`,
            );
          } else if (!hasBearer || tenantOf(apikey) === 0 || tenantOf(bearer) !== tenantOf(apikey)) {
            assert.equal(o.status, 401, show(o));
          }
        },
      ),
      150,
    );
  });

  test("property: well-formed queries over real columns and relationships succeed with only the user's rows", async (ctx) => {
    if (skipped(ctx)) return;
    const valueFor = (type: string): fc.Arbitrary<string> => {
      const word = fc.stringMatching(/^[a-z0-9]{1,8}$/);
      switch (type) {
        case "uuid":
          return fc.oneof(
            fc.constantFrom("is.null", "not.is.null"),
            fc.uuid().map((u) => `eq.${u}`),
            fc.constantFrom(...Object.values(me.ids).flat()).map((u) => `eq.${u}`),
            fc.array(fc.uuid(), { maxLength: 3 }).map((us) => `in.(${us.join(",")})`),
          );
        case "text":
        case "bpchar":
          return fc.oneof(
            word.map((w) => `eq.${w}`),
            word.map((w) => `like.*${w}*`),
            word.map((w) => `ilike.${w}*`),
            word.map((w) => `not.ilike.*${w}`),
            fc.array(word, { maxLength: 3 }).map((ws) => `in.(${ws.join(",")})`),
            fc.constantFrom("is.null", "not.is.null"),
          );
        case "int4":
        case "int8":
        case "numeric":
          return fc
            .tuple(
              fc.constantFrom("eq", "neq", "gt", "gte", "lt", "lte"),
              fc.integer({ min: -10, max: 100_000 }),
            )
            .map(([op, n]) => `${op}.${n}`);
        case "bool":
          return fc.constantFrom("is.true", "is.false", "eq.true", "not.is.null");
        case "date":
          return fc
            .tuple(
              fc.constantFrom("gte", "lt", "eq"),
              fc.constantFrom("2026-01-01", "2026-09-18", "1999-12-31"),
            )
            .map(([op, d]) => `${op}.${d}`);
        case "timestamptz":
          return fc.constantFrom("lt.2100-01-01T00:00:00Z", "gt.2000-01-01", "not.is.null");
        case "jsonb":
          return fc.constantFrom("is.null", "not.is.null", "cs.{}");
        case "_text":
          return fc.constantFrom("cs.{}", "cs.{pop}", "ov.{pop,rock}", "not.is.null");
        default:
          return fc.constant("not.is.null");
      }
    };
    const filterOn = (table: Table) =>
      fc
        .constantFrom(...columns[table])
        .chain((c) => valueFor(c.type).map((v): [string, string] => [c.name, v]));
    const colsOf = (table: Table) =>
      fc
        .subarray(
          columns[table].map((c) => c.name),
          { minLength: 1, maxLength: 4 },
        )
        .map((xs) => xs.map((x, i) => (i === 0 ? x : `a${i}:${x}`)).join(","));

    type Shape = { select: string; params: [string, string][] };
    const embedOf = (table: Table, depth: number, prefix: string): fc.Arbitrary<Shape> => {
      const rels = RELATIONS[table];
      const base = fc.oneof(fc.constant("*"), colsOf(table));
      if (depth === 0 || rels.length === 0) return base.map((select) => ({ select, params: [] }));
      return fc
        .tuple(
          base,
          fc.subarray(rels, { maxLength: Math.min(2, rels.length) }).chain((chosen) =>
            fc.tuple(
              ...chosen.map((rel) =>
                fc
                  .tuple(
                    embedOf(rel.target, depth - 1, `${prefix}${rel.target}.`),
                    fc.constantFrom("", "!inner", "!left"),
                    fc.boolean(),
                    fc.option(filterOn(rel.target), { freq: 3 }),
                    fc.option(fc.nat(3), { freq: 2 }),
                    fc.option(fc.constantFrom(...columns[rel.target].map((c) => c.name)), { freq: 2 }),
                    fc.subarray(
                      columns[rel.target].map((c) => c.name),
                      { minLength: 1, maxLength: 3 },
                    ),
                  )
                  .map(([inner, join, spread, filter, limit, order, spreadColumns]): Shape => {
                    const path = `${prefix}${rel.target}`;
                    if (spread && rel.toOne) {
                      // A spread's columns join the parent's: each gets a name of its own.
                      const alias = (c: string) => `${path.replace(/\./g, "_")}_${c}`;
                      return {
                        select: `...${rel.target}(${spreadColumns.map((c) => `${alias(c)}:${c}`).join(",")})`,
                        params: [],
                      };
                    }
                    const params: [string, string][] = [...inner.params];
                    if (filter) params.push([`${path}.${filter[0]}`, filter[1]]);
                    if (limit !== null) params.push([`${path}.limit`, String(limit)]);
                    if (order) params.push([`${path}.order`, `${order}.desc.nullslast`]);
                    return { select: `${rel.target}${join}(${inner.select})`, params };
                  }),
              ),
            ),
          ),
        )
        .map(([b, embeds]) => ({
          select: [b, ...embeds.map((e) => e.select)].join(","),
          params: embeds.flatMap((e) => e.params),
        }));
    };

    await check(
      fc.asyncProperty(
        fc.constantFrom(...TABLES).chain((table) =>
          fc.record({
            table: fc.constant(table),
            shape: embedOf(table, 2, ""),
            filters: fc.array(filterOn(table), { maxLength: 3 }),
            or: fc.option(
              fc
                .array(filterOn(table), { minLength: 1, maxLength: 3 })
                .map((fs) => fs.map(([c, v]) => `${c}.${v}`)),
              { freq: 3 },
            ),
            order: fc.option(fc.constantFrom(...columns[table].map((c) => c.name)), { freq: 2 }),
            limit: fc.option(fc.nat(20), { freq: 2 }),
            offset: fc.option(fc.nat(3), { freq: 3 }),
            count: fc.constantFrom(undefined, "exact"),
          }),
        ),
        async (q) => {
          const params: [string, string][] = [["select", q.shape.select], ...q.shape.params, ...q.filters];
          if (q.or) params.push(["or", `(${q.or.join(",")})`]);
          if (q.order) params.push(["order", `${q.order}.asc`]);
          if (q.limit !== null) params.push(["limit", String(q.limit)]);
          if (q.offset !== null) params.push(["offset", String(q.offset)]);
          const query = params.map(([k, v]) => `${pct(k)}=${pct(v)}`).join("&");
          const o = await send("GET", `${q.table}?${query}`, {
            headers: q.count ? { prefer: `count=${q.count}` } : {},
          });
          invariants(o);
          // 416 only for an offset past the counted total, as PostgREST.
          const past = o.status === 416 && q.count === "exact" && (q.offset ?? 0) > 0;
          assert.ok(o.status === 200 || o.status === 206 || past, `a well-formed query failed: ${show(o)}`);
          if (past) return;
          const rows = JSON.parse(o.text) as unknown[];
          assert.ok(Array.isArray(rows));
          const mine = new Set([...Object.values(me.ids).flat(), me.accountId, me.userId]);
          for (const id of o.text.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ??
            []) {
            assert.ok(mine.has(id) || !victims.some((v) => secretsOf(v).includes(id)), show(o));
          }
        },
      ),
      200,
    );
  });

  // ---------------------------------------------------------------------------------------------
  // A corpus of hostile requests, checked against the same invariants (and what PostgREST answers)

  test("corpus: deep nesting, huge values, long URLs and large bodies", async () => {
    const deep = (n: number) => `(id.eq.1,${"or(id.is.null,".repeat(n)}title.eq.x${")".repeat(n)})`;
    const cases: [string, string, Record<string, string>?, string?][] = [
      ["GET", `releases?or=${pct(deep(31))}`],
      ["GET", `releases?or=${pct(deep(33))}`],
      ["GET", `releases?or=${pct(deep(500))}`],
      ["GET", `releases?select=${pct(`id,${"tracks(id,releases(id,".repeat(20)}id${"))".repeat(20)}`)}`],
      ["GET", `releases?select=${pct(`${"releases(".repeat(600)}id${")".repeat(600)}`)}`],
      ["GET", `releases?id=in.(${Array.from({ length: 300 }, () => randomUUID()).join(",")})`],
      ["GET", `releases?title=match.${pct("(((a+)+)+)+$")}`],
      ["GET", `releases?title=like.${pct("%".repeat(500))}`],
      ["GET", `releases?title=eq.${pct("\u0000")}`],
      ["GET", `releases?${pct("title\u0000")}=eq.x`],
      ["GET", `releases?limit=${"9".repeat(400)}`],
      ["GET", `releases?title=eq.${"%".repeat(3000)}`],
      ["GET", "releases?select=*&select=id,,"],
      [
        "POST",
        "releases",
        { "content-type": "application/json" },
        `{"title":"${"x".repeat(2 * 1024 * 1024)}"}`,
      ],
      [
        "POST",
        "releases",
        { "content-type": "application/json" },
        `${"[".repeat(100_000)}${"]".repeat(100_000)}`,
      ],
      ["PATCH", "releases?id=eq.1", { "content-type": "application/json" }, '{"title":"\\u0000"}'],
      ["GET", "releases", { range: "0-99999999999999999999999999999" }],
      ["GET", "releases", { prefer: `count=exact,${"x=y,".repeat(2000)}` }],
    ];
    for (const [method, path, hdrs, payload] of cases) {
      const o = await send(method, path, {
        headers: hdrs ?? {},
        ...(payload === undefined ? {} : { body: payload }),
      });
      invariants(o);
    }
    // Beyond what a request line may carry: Node refuses it before the app (431, no body), promptly.
    const long = await send("GET", `releases?title=eq.${"x".repeat(40_000)}`);
    assert.ok(long.status === 414 || long.status === 431, `${long.status}`);
    assert.ok(long.ms < SLOW_MS);
    assert.deepEqual(await victimSnapshot(), before0);
  });

  test("corpus: an empty array inserts nothing, with or without missing=default", async () => {
    // PostgREST: 201 and [] (nothing inserted, nothing returned).
    for (const prefer of ["return=representation", "missing=default,return=representation"]) {
      for (const table of ["artist_profiles", "releases", "tracks"]) {
        const o = await send("POST", table, {
          headers: { prefer, "content-type": "application/json" },
          body: "[]",
        });
        invariants(o);
        assert.ok(o.status === 201 || o.status === 200, show(o));
        assert.equal(o.text, "[]", show(o));
      }
    }
  });

  test("corpus: planned and estimated counts answer with a total; an estimate of a small table is its exact count under RLS", async () => {
    for (const table of TABLES) {
      const owner = table === "notifications" ? "user_id" : "account_id";
      const [own] = (
        await t().db.asService((tx) =>
          tx.query<{ n: number }>(`select count(*)::int as n from public.${table} where ${owner} = $1`, [
            table === "notifications" ? me.userId : me.accountId,
          ]),
        )
      ).rows;
      for (const count of ["planned", "estimated"]) {
        for (const method of ["GET", "HEAD"]) {
          const o = await send(method, `${table}?select=id`, { headers: { prefer: `count=${count}` } });
          invariants(o);
          assert.ok(o.status === 200 || o.status === 206, show(o));
          const range = o.headers.find(([k]) => k === "content-range")?.[1] ?? "";
          assert.match(range, /^(\d+-\d+|\*)\/\d+$/, `${count}: ${range}`);
          if (count === "estimated") assert.equal(range.split("/")[1], String(own?.n), `${table}: ${range}`);
        }
      }
    }
  });

  test("corpus: an unknown path under /rest/v1 answers 404 in PostgREST's shape", async () => {
    // PostgREST: 404 {"code":"PGRST125","message":"Invalid path specified in request URL",...}.
    for (const [method, path] of [
      ["GET", "releases/extra"],
      ["GET", "rpc/anything"],
      ["POST", "releases/1"],
      ["DELETE", "a/b/c"],
      ["POST", ""],
      ["PATCH", ""],
      // A table name longer than the router's parameter limit: PostgREST says PGRST205.
      ["GET", "x".repeat(150)],
      ["GET", pct("é".repeat(60))],
    ] as const) {
      const o = await send(method, path, {
        headers: method === "POST" ? { "content-type": "application/json" } : {},
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      assert.equal(o.status, 404, show(o));
      invariants(o);
    }
  });

  test("corpus: a to-one embed with its own limit is a valid request (PostgREST answers 200)", async () => {
    const o = await send(
      "GET",
      "releases?select=id,artist_profiles(id,name)&artist_profiles.limit=1&artist_profiles.order=name",
    );
    invariants(o);
    assert.equal(o.status, 200, show(o));
    const rows = JSON.parse(o.text) as { artist_profiles: { id: string } | null }[];
    assert.ok(rows.length >= 2);
    assert.ok(rows.every((r) => r.artist_profiles?.id === me.ids.artist_profiles[0]));
  });

  test("corpus: deleting an artist that still has releases is a conflict (409), not a server error", async () => {
    // releases.artist_id is ON DELETE RESTRICT: PostgreSQL raises 23001 restrict_violation. The
    // seed: 409 for conflicting data (PostgREST itself answers 400 for it); never 500.
    const artist = me.ids.artist_profiles[0] as string;
    for (const path of [`artist_profiles?id=eq.${artist}`, "artist_profiles"]) {
      const o = await send("DELETE", path, { headers: { prefer: "return=representation" } });
      invariants(o);
      assert.equal(o.status, 409, show(o));
    }
    const [row] = (
      await t().db.asService((tx) =>
        tx.query<{ n: number }>("select count(*)::int as n from public.artist_profiles where id = $1", [
          artist,
        ]),
      )
    ).rows;
    assert.equal(row?.n, 1, "the artist is still there");
  });

  test("corpus: a filter on a resource that is not embedded is refused (PGRST108), never dropped", async () => {
    // PostgREST: 400 PGRST108 "Cannot apply filter because 'releases' is not an embedded resource
    // in this request". Dropping the filter turns a narrow DELETE or PATCH into one on every row.
    const artist = me.ids.artist_profiles[0] as string;
    const count = async () =>
      (
        await t().db.asService((tx) =>
          tx.query<{ n: number }>(
            "select count(*)::int as n from public.artist_profiles where account_id = $1 and name like $2",
            [me.accountId, `${me.marker}%`],
          ),
        )
      ).rows[0]?.n;
    for (const [method, path] of [
      ["GET", `artist_profiles?releases.id=eq.${randomUUID()}`],
      ["PATCH", `artist_profiles?releases.id=eq.${randomUUID()}`],
      ["DELETE", `artist_profiles?releases.id=eq.${randomUUID()}`],
      ["GET", `artist_profiles?select=id,releases(id)&releases.tracks.id=eq.${randomUUID()}`],
    ] as const) {
      const o = await send(method, path, {
        headers: { prefer: "return=representation", "content-type": "application/json" },
        ...(method === "PATCH" ? { body: JSON.stringify({ bio: "changed by an ignored filter" }) } : {}),
      });
      invariants(o);
      assert.equal(o.status, 400, show(o));
      assert.equal((JSON.parse(o.text) as { code: string }).code, "PGRST108", show(o));
    }
    assert.equal(await count(), 1, "the artist is still there");
    const [row] = (
      await t().db.asService((tx) =>
        tx.query<{ bio: string }>("select bio from public.artist_profiles where id = $1", [artist]),
      )
    ).rows;
    assert.equal(row?.bio, `${me.marker} artist`);
  });
});
