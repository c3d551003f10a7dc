import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import openapiTS from "openapi-typescript";
import { FILLING_TRIGGERS, insertTriggers } from "../src/rest/schema-cache.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { forceReleaseStatus, memberToken, seedAccount } from "./support/seed.ts";

/**
 * Issue 29, item 2: GET /rest/v1/ describes the tables as the server answers them. Real answers of
 * several tables — rows, writes, and each kind of error — are read against the served document
 * (status, media type and body, with ajv), the bodies sent are checked against its request
 * schemas, and a client generated from it (openapi-typescript) type-checks a small program.
 */

type Doc = {
  paths: Record<string, Record<string, { responses: Record<string, { $ref?: string } & Response> }>>;
  components: {
    schemas: Record<string, Record<string, unknown>>;
    responses: Record<string, Response>;
  };
};
type Response = { content?: Record<string, { schema: unknown }> };

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/** Ajv over the document's schemas: OpenAPI 3.0's `nullable` is Ajv's own; `example` is only a note. */
function validator(doc: Doc): (schema: unknown) => ValidateFunction {
  const ajv = new Ajv({ allErrors: true, strict: true });
  addFormats(ajv);
  ajv.addVocabulary(["example"]);
  const rewrite = (x: unknown): unknown =>
    JSON.parse(JSON.stringify(x).replaceAll('"#/components/schemas/', '"rest#/definitions/'));
  ajv.addSchema({ $id: "rest", definitions: rewrite(doc.components.schemas) });
  const cache = new Map<string, ValidateFunction>();
  return (schema) => {
    const key = JSON.stringify(schema);
    let v = cache.get(key);
    if (!v) {
      v = ajv.compile(rewrite(schema) as object);
      cache.set(key, v);
    }
    return v;
  };
}

describeEachEngine("rest: the OpenAPI description", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let anonKey = "";
  let serviceKey = "";
  let token = "";
  let doc: Doc;
  let compile: (schema: unknown) => ValidateFunction;

  before(async () => {
    app = await startApp(t());
    const created = await tenantWithKeys(t());
    tenant = created.tenant;
    anonKey = created.keys.anon_key;
    serviceKey = created.keys.service_role_key;
    token = await memberToken(t().db, tenant, [await seedAccount(t().db, tenant)], `${app.url}/auth/v1`);
    doc = await description(token);
    compile = validator(doc);
  });
  after(async () => {
    await app?.close();
  });

  async function description(bearer: string, apikey = anonKey): Promise<Doc> {
    const res = await fetch(`${app.url}/rest/v1/`, {
      headers: { apikey, authorization: `Bearer ${bearer}` },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/openapi\+json/);
    return (await res.json()) as Doc;
  }

  interface Answer {
    status: number;
    body: unknown;
  }

  /**
   * Sends a request as the member and checks the answer against the description: its status is
   * one the operation lists, its media type one the response lists, and its body validates.
   */
  async function call(
    method: string,
    table: string,
    query = "",
    init: { body?: unknown; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = {
      apikey: anonKey,
      authorization: `Bearer ${token}`,
      ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      ...init.headers,
    };
    const res = await fetch(`${app.url}/rest/v1/${table}${query}`, {
      method,
      headers,
      body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
    });
    const text = await res.text();
    const op = doc.paths[`/${table}`]?.[method.toLowerCase()];
    assert.ok(op, `${method} /${table} is not described`);
    let response = op.responses[String(res.status)];
    assert.ok(response, `${method} /${table}${query} answered ${res.status}, not described: ${text}`);
    if (response.$ref) response = doc.components.responses[response.$ref.split("/").pop() as string];
    if (!text) return { status: res.status, body: undefined };
    const type = (res.headers.get("content-type") ?? "").split(";")[0]?.trim() as string;
    const media = response?.content?.[type];
    assert.ok(media, `${method} /${table} ${res.status} answered ${type}, not described`);
    const body = type === "text/csv" ? text : JSON.parse(text);
    const validate = compile(media.schema);
    assert.ok(
      validate(body),
      `${method} /${table}${query} ${res.status}: ${JSON.stringify(validate.errors)}\n${text.slice(0, 500)}`,
    );
    return { status: res.status, body };
  }

  /** The body a client sends, against the operation's request schema. */
  function assertRequest(schema: string, body: unknown): void {
    const validate = compile({ $ref: `#/components/schemas/${schema}` });
    assert.ok(validate(body), `${schema}: ${JSON.stringify(validate.errors)}`);
  }

  const representation = { prefer: "return=representation" };

  test("rows written and read through four tables are what the description says", async () => {
    const artistBody = { name: "Mira Vale", bio: null };
    assertRequest("artist_profiles.insert", artistBody);
    const artist = await call("POST", "artist_profiles", "", { body: artistBody, headers: representation });
    assert.equal(artist.status, 201);
    const artistId = (artist.body as { id: string }[])[0]?.id as string;

    // account_id is the database's to fill: neither sent nor required.
    const releaseBody = { title: "Night Drive", artist_id: artistId };
    assertRequest("releases.insert", releaseBody);
    assert.equal(compile({ $ref: "#/components/schemas/releases.insert" })({ title: "No artist" }), false);
    const release = await call("POST", "releases", "", { body: releaseBody, headers: representation });
    assert.equal(release.status, 201);
    const releaseId = (release.body as { id: string; version: null }[])[0]?.id as string;
    assert.equal((release.body as { version: null }[])[0]?.version, null, "a nullable column answers null");

    const trackBody = { release_id: releaseId, title: "Coastline", duration: 198, isrc: "PTABC2700001" };
    assertRequest("tracks.insert", trackBody);
    assert.equal(
      (await call("POST", "tracks", "", { body: trackBody, headers: representation })).status,
      201,
    );
    assert.equal((await call("POST", "tracks", "", { body: { ...trackBody, isrc: null } })).status, 201);

    // PATCH takes any subset of the columns.
    assertRequest("releases.update", { title: "Night Drive (Remastered)" });
    assertRequest("releases.update", {});
    const patched = await call("PATCH", "releases", `?id=eq.${releaseId}`, {
      body: { title: "Night Drive (Remastered)" },
      headers: representation,
    });
    assert.equal(patched.status, 200);
    assert.equal(
      (await call("PATCH", "releases", `?id=eq.${releaseId}`, { body: { language: "en" } })).status,
      204,
    );

    for (const table of ["artist_profiles", "releases", "tracks", "takedown_requests", "notifications"]) {
      assert.equal((await call("GET", table)).status, 200, table);
    }
    const embedded = await call("GET", "releases", "?select=*,tracks(*)");
    assert.equal((embedded.body as { tracks: unknown[] }[])[0]?.tracks.length, 2);
    const single = await call("GET", "releases", `?id=eq.${releaseId}`, {
      headers: { accept: "application/vnd.pgrst.object+json" },
    });
    assert.equal((single.body as { id: string }).id, releaseId);
    assert.equal(
      (await call("GET", "tracks", "", { headers: { range: "0-0", prefer: "count=exact" } })).status,
      206,
    );
    assert.equal((await call("GET", "tracks", "", { headers: { accept: "text/csv" } })).status, 200);

    // A delivered release's takedown, and its analytics: money answered as a JSON number, as described.
    await forceReleaseStatus(t().db, releaseId, "delivered");
    const takedownBody = { release_id: releaseId, reason: "Rights ended" };
    assertRequest("takedown_requests.insert", takedownBody);
    const takedown = await call("POST", "takedown_requests", "", {
      body: takedownBody,
      headers: representation,
    });
    assert.equal(takedown.status, 201);
    await t().db.asService((tx) =>
      tx.query(
        `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, streams, revenue, currency)
         select id, account_id, '2026-06-01', '2026-06-30', 'sandbox', 1000, 4.25, 'USD' from public.releases where id = $1`,
        [releaseId],
      ),
    );
    const analytics = await call("GET", "release_analytics", `?release_id=eq.${releaseId}`);
    const row = (analytics.body as { revenue: unknown; streams: unknown }[])[0];
    assert.equal(row?.revenue, 4.25);
    assert.equal(typeof row?.streams, "number");
    const revenue = doc.components.schemas.release_analytics?.properties as Record<string, { type: string }>;
    assert.equal(revenue.revenue?.type, "number");
  });

  test("each kind of error the server gives is described, with PostgREST's body", async () => {
    const expect = async (answer: Promise<Answer>, status: number, code?: string) => {
      const a = await answer;
      assert.equal(a.status, status, JSON.stringify(a.body));
      if (code) assert.equal((a.body as { code: string }).code, code);
    };
    await expect(call("GET", "releases", "?id=eq.not-a-uuid"), 400, "22P02");
    await expect(call("GET", "releases", "?select=nope"), 400, "42703");
    await expect(call("GET", "releases", "?id=zz.1"), 400, "PGRST100");
    await expect(call("POST", "releases", "", { body: { artist_id: null, title: "x" } }), 400);
    await expect(
      call("POST", "releases", "", { raw: "{", headers: { "content-type": "application/json" } }),
      400,
    );
    await expect(call("GET", "releases", "", { headers: { authorization: "" } }), 401, "PGRST302");
    await expect(call("GET", "releases", "", { headers: { apikey: "", authorization: "" } }), 401);
    await expect(call("GET", "releases", "", { headers: { authorization: "Bearer nope" } }), 401);
    await expect(
      call("PATCH", "releases", "?id=eq.00000000-0000-4000-8000-000000000000", {
        body: { status_reason: "x" },
      }),
      403,
      "42501",
    );
    await expect(
      call("GET", "releases", "?id=eq.00000000-0000-4000-8000-000000000000", {
        headers: { accept: "application/vnd.pgrst.object+json" },
      }),
      406,
      "PGRST116",
    );
    await expect(call("GET", "releases", "", { headers: { accept: "image/png" } }), 406, "PGRST107");
    await expect(call("GET", "releases", "", { headers: { "accept-profile": "internal" } }), 406, "PGRST106");
    const artist = await call("POST", "artist_profiles", "", {
      body: { name: "Held" },
      headers: representation,
    });
    const artistId = (artist.body as { id: string }[])[0]?.id;
    await call("POST", "releases", "", { body: { title: "Holds", artist_id: artistId } });
    await expect(call("DELETE", "artist_profiles", `?id=eq.${artistId}`), 409);
    await expect(
      call("POST", "artist_profiles", "", { raw: "name=x", headers: { "content-type": "text/plain" } }),
      400,
      "PGRST102",
    );
    await expect(
      call("POST", "artist_profiles", "", {
        raw: JSON.stringify({ name: "x".repeat(1_100_000) }),
        headers: { "content-type": "application/json" },
      }),
      413,
    );
    await expect(
      call("GET", "releases", "", { headers: { range: "50-60", prefer: "count=exact" } }),
      416,
      "PGRST103",
    );
    // Over the caller's rate limit: a tenant whose users may send one request per minute.
    const limited = await tenantWithKeys(t(), {
      settings: { rest_rate_limits: { caller: { max: 1, windowSeconds: 60 } } },
    });
    const headers = {
      apikey: limited.keys.anon_key,
      authorization: `Bearer ${await memberToken(t().db, limited.tenant, [await seedAccount(t().db, limited.tenant)], `${app.url}/auth/v1`)}`,
    };
    await expect(call("GET", "releases", "", { headers }), 200);
    await expect(call("GET", "releases", "", { headers }), 429, "BL429");
  });

  test("each caller is described what its role may do (PostgREST's follow-privileges)", async () => {
    const schema = (d: Doc, name: string) =>
      d.components.schemas[name] as { properties: Record<string, unknown>; required?: string[] } | undefined;
    // The anon key's apps sign users in: they read a signed-in user's description.
    assert.deepEqual(await description(anonKey), doc);
    // A user marks a notification read, and changes nothing else of it.
    assert.deepEqual(Object.keys(schema(doc, "notifications.update")?.properties ?? {}), ["read"]);
    assert.deepEqual(Object.keys(doc.paths["/notifications"] ?? {}), ["get", "patch"]);
    // Reads analytics, writes none; inserts a release without naming its creator.
    assert.deepEqual(Object.keys(doc.paths["/release_analytics"] ?? {}), ["get"]);
    assert.equal(schema(doc, "releases.insert")?.properties.created_by, undefined);
    assert.ok(
      schema(doc, "releases.insert")?.properties.account_id,
      "a user with several accounts may name one",
    );
    assert.equal(schema(doc, "releases.update")?.properties.status_reason, undefined, "the operator's");
    // A tenant's service-role key writes analytics (account_id required: no trigger fills it there).
    const service = await description(serviceKey, serviceKey);
    assert.deepEqual(Object.keys(service.paths["/release_analytics"] ?? {}), [
      "get",
      "post",
      "patch",
      "delete",
    ]);
    assert.ok(schema(service, "release_analytics.insert")?.required?.includes("account_id"));
    assert.ok(schema(service, "releases.insert")?.properties.created_by);
  });

  test("every BEFORE INSERT trigger of an exposed table is in FILLING_TRIGGERS", async () => {
    const triggers = await t().db.asService((tx) => insertTriggers(tx, "public"), { readOnly: true });
    assert.ok(triggers.length > 0);
    const unknown = triggers.filter((tr) => !(tr.function_name in FILLING_TRIGGERS));
    assert.deepEqual(
      unknown,
      [],
      "name each in src/rest/schema-cache.ts FILLING_TRIGGERS with the NOT NULL columns it fills (or none)",
    );
  });

  test("a client generated from the description types inserts, money and nulls as the server answers them", async () => {
    const dir = tempDir("backline-rest-client-");
    try {
      fs.writeFileSync(path.join(dir, "rest.ts"), await openapiTS(doc as never));
      fs.writeFileSync(
        path.join(dir, "program.ts"),
        `import type { components, paths } from "./rest.ts";
type S = components["schemas"];
type InsertBody = paths["/releases"]["post"]["requestBody"]["content"]["application/json"];
// An insert without account_id (the database fills it) or any column with a default.
export const release: S["releases.insert"] = { title: "Night Drive", artist_id: "9b2c…" };
export const batch: InsertBody = [release, { title: "Coastline", artist_id: "9b2c…", release_date: null }];
// @ts-expect-error title is required
export const untitled: S["releases.insert"] = { artist_id: "9b2c…" };
// An update requires nothing, and takes only what a user may change.
export const update: paths["/releases"]["patch"]["requestBody"]["content"]["application/json"] = {};
// @ts-expect-error status_reason is the operator's
export const reason: S["releases.update"] = { status_reason: "x" };
// Money is a number, as the server answers it.
export const revenue: S["release_analytics"]["revenue"] = 4.25;
// @ts-expect-error not a string
export const revenueText: S["release_analytics"]["revenue"] = "4.25";
// A nullable column is \`| null\`; a NOT NULL one is not.
export const version: S["releases"]["version"] = null;
// @ts-expect-error title is NOT NULL
export const noTitle: S["releases"]["title"] = null;
// A status is one of the values the check allows.
export const status: S["releases"]["status"] = "submitted";
// @ts-expect-error not a status
export const badStatus: S["releases"]["status"] = "published";
export const rows: paths["/releases"]["get"]["responses"][200]["content"]["application/json"] = [];
`,
      );
      fs.writeFileSync(
        path.join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            target: "es2022",
            module: "nodenext",
            moduleResolution: "nodenext",
            allowImportingTsExtensions: true,
            types: [],
          },
          files: ["program.ts"],
        }),
      );
      const tsc = path.resolve("node_modules/.bin/tsc");
      const result = await promisify(execFile)(tsc, ["-p", dir]).catch(
        (e: { stdout: string; code: number }) => e,
      );
      assert.equal("code" in result ? result.code : 0, 0, result.stdout);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
