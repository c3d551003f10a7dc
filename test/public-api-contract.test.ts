import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { updateMoneySettings } from "../src/money/operator.ts";
import { reviewTaxForm } from "../src/money/payees.ts";
import { approvePeriod } from "../src/money/statements.ts";
import { requestHash } from "../src/public-api/idempotency.ts";
import { ROUTES } from "../src/public-api/plugin.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { runTransferJob } from "../src/transfer/job.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg } from "./support/media-fixtures.ts";
import { type Prism, startPrism } from "./support/prism.ts";
import { completeRelease, type IssuedKey, issueTestKey } from "./support/public-api.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { forceReleaseStatus, type SeedUser, seedAccount, seedUser, userToken } from "./support/seed.ts";

/**
 * The OpenAPI document of /api/public/v1 is a contract: this suite reads it from the running
 * server, compiles its schemas (JSON Schema 2020-12, as OpenAPI 3.1 uses them) and drives a whole
 * account's life through every operation it lists, over real HTTP, through Stoplight Prism's
 * validating proxy (test/support/prism.ts) in front of the server. Every response must be a
 * status the document lists for its operation, with the documented media type, headers the
 * document names for that answer, and a body the documented schema accepts; successes and errors
 * alike (errors are the Problem schema). Prism must report no violation (`sl-violations`), and
 * this suite checks the same again with its own validator, more strictly (no undocumented field,
 * no undocumented header). Every operation of the document must have been called at least once,
 * and every error a route's spec makes it document (401, 403, 404, 413, 415, 400 bad JSON, 422,
 * 409, 412, 304, 429, 503) is provoked on every operation where it can be — 413 and 415 on every
 * method whose body the server reads, with a request body documented or not.
 */

// ajv-formats is CommonJS: its default export is the function itself, or under .default.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = Record<string, unknown>;

const METHODS = ["get", "put", "post", "patch", "delete", "head", "options", "trace"];
const REF = "#/components/schemas/";
const SCHEMAS_BASE = "urn:backline:openapi:schemas";
const CLOSED_BASE = "urn:backline:openapi:schemas:closed";

/** A body each POST that requires one accepts, for the checks that come after the body's. */
const VALID_BODIES: Record<string, Json> = {
  createRelease: completeRelease(),
  createTrack: { title: "Sample" },
  createArtist: { name: "Sample" },
  createApiKey: { name: "Sample", scopes: ["catalog:read"] },
  revealApiKey: { code: "123456" },
  createWebhook: { url: "https://93.184.216.34/sample", events: ["release.live"] },
  setPayoutMethod: { method: { provider: "paypal", receiver: "sample@example.com" } },
  createTransfer: { upload_id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21" },
  createTicket: { subject: "Sample", body: "Sample" },
  replyToTicket: { body: "Sample" },
  buyReleaseAddOn: { add_on: "sample" },
};

/** A path only Prism's copy of the document has (the server answers it 404): see "The proxy bites". */
const PRISM_PROBE = "/prism-probe";

/**
 * Headers any HTTP answer may carry that are the transport's, not the API's contract (CORS headers
 * are left out by their prefix). Every other header must be documented on the answer.
 */
const TRANSPORT_HEADERS = new Set([
  "content-type",
  "content-length",
  "date",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "vary",
]);

interface Operation {
  operationId: string;
  method: string;
  path: string;
  op: Json;
}

interface Called {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked against the document, then read freely.
  body: any;
}

/**
 * `#/components/schemas/X` as a reference into the one schema that holds every component. With
 * `closed`, every object schema also refuses fields it does not name: the document leaves
 * responses open to new fields (clients must ignore them), but today's responses must carry only
 * documented ones.
 */
function rebase(node: unknown, closed = false): unknown {
  if (Array.isArray(node)) return node.map((n) => rebase(n, closed));
  if (node && typeof node === "object") {
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] =
        k === "$ref" && typeof v === "string" && v.startsWith(REF)
          ? `${closed ? CLOSED_BASE : SCHEMAS_BASE}#/$defs/${v.slice(REF.length)}`
          : rebase(v, closed);
    }
    if (closed && out.type === "object" && out.properties && out.additionalProperties === undefined) {
      out.additionalProperties = false;
    }
    return out;
  }
  return node;
}

/** The named schemas a schema reaches, itself included when it is a reference. */
function reachable(schema: unknown, components: Json, seen = new Set<string>()): Set<string> {
  if (Array.isArray(schema)) for (const s of schema) reachable(s, components, seen);
  else if (schema && typeof schema === "object") {
    for (const [k, v] of Object.entries(schema)) {
      if (k === "$ref" && typeof v === "string" && v.startsWith(REF)) {
        const name = v.slice(REF.length);
        if (!seen.has(name)) {
          seen.add(name);
          reachable(components[name], components, seen);
        }
      } else reachable(v, components, seen);
    }
  }
  return seen;
}

describeEachEngine("public API: the OpenAPI document is the contract", (t) => {
  let app: RunningApp;
  let prism: Prism;
  let proxy: Promise<Prism> | undefined;
  let doc: Json;
  let ajv: Ajv2020;
  const operations = new Map<string, Operation>();
  const exercised = new Set<string>();
  /** "<operationId> <status>" of every answer seen. */
  const provoked = new Set<string>();
  const validators = new Map<string, ValidateFunction>();

  let tenant: Tenant;
  let account: Account;
  let other: Account;
  let writer: IssuedKey;
  let reader: IssuedKey;
  let manager: IssuedKey;
  let otherKey: IssuedKey;
  /** A person a split of the account's track names: the /me routes answer for them (aal2). */
  let payee: SeedUser;
  let payeeToken: string;

  before(async () => {
    // Behind a proxy (Prism), the client's address comes from X-Forwarded-For: the sweep of 401s
    // below sends each from its own address, under the per-address limit on failed credentials.
    app = await startApp(t(), { TRUST_PROXY: "true" });
    const res = await fetch(`${app.url}/api/public/v1/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    doc = (await res.json()) as Json;
    // Prism takes a few seconds to read the document: it starts while the account is seeded.
    proxy = startPrism(
      {
        ...doc,
        paths: {
          ...(doc.paths as Json),
          [PRISM_PROBE]: { get: { operationId: "prismProbe", responses: { "200": { description: "OK" } } } },
        },
      },
      `${app.url}/api/public/v1`,
    );
    tenant = (
      await tenantWithKeys(t(), {
        // The scenario sends well over the default 100 requests per 10 s with one key.
        settings: { public_api_rate_limit: { max: 100_000, windowSeconds: 60 } },
      })
    ).tenant;
    account = await seedAccount(t().db, tenant, "Night Owl Records");
    other = await seedAccount(t().db, tenant, "Other Label");
    // An owner with an address, so keys created through the API can be verified by e-mail.
    await seedUser(t().db, tenant, [{ account, role: "owner" }]);
    writer = await issueTestKey(t().db, account, { name: "writer" });
    reader = await issueTestKey(t().db, account, { name: "reader", scopes: ["catalog:read"] });
    manager = await issueTestKey(t().db, account, {
      name: "manager",
      scopes: ["keys:manage", "catalog:read"],
    });
    otherKey = await issueTestKey(t().db, other, {
      name: "other",
      scopes: ["keys:manage", "catalog:read", "catalog:write"],
    });
    payee = await seedUser(t().db, tenant);
    payeeToken = await userToken(t().db, tenant, payee, `${app.url}/auth/v1`, "aal2");

    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const method of METHODS) {
        const op = item[method] as Json | undefined;
        if (!op) continue;
        operations.set(String(op.operationId), { operationId: String(op.operationId), method, path, op });
      }
    }

    prism = await proxy;

    ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
    addFormats(ajv);
    // OpenAPI's own schema keyword (3.1 keeps `example` beside JSON Schema's `examples`).
    ajv.addKeyword({ keyword: "example", schemaType: ["string", "number", "boolean", "object", "array"] });
    const schemas = (doc.components as Json).schemas as Json;
    ajv.addSchema({ $id: SCHEMAS_BASE, $defs: rebase(schemas) as Json });
    ajv.addSchema({ $id: CLOSED_BASE, $defs: rebase(schemas, true) as Json });
    for (const name of Object.keys(schemas)) {
      // Each component compiles on its own: a schema the document cannot express fails here.
      assert.ok(ajv.getSchema(`${SCHEMAS_BASE}#/$defs/${name}`), `components.schemas.${name} compiles`);
    }
  });

  after(async () => {
    // Closed even when the setup failed after starting it.
    await (await proxy?.catch(() => undefined))?.close();
    await app?.close();
  });

  function validatorFor(operationId: string, status: number, mediaType: string, schema: Json) {
    const key = `${operationId} ${status} ${mediaType}`;
    let v = validators.get(key);
    if (!v) {
      v = ajv.compile(rebase(schema, true) as Json);
      validators.set(key, v);
    }
    return v;
  }

  /**
   * Calls an operation by its operationId, at the path the document gives it, and checks the
   * response against the document. `expect` is the status the scenario expects.
   */
  async function call(
    operationId: string,
    expect: number,
    options: {
      params?: Record<string, string>;
      query?: Record<string, string>;
      body?: unknown;
      /** A body sent as it is, with its media type (bad JSON, another media type, a large body). */
      raw?: { type: string; body: string };
      key?: IssuedKey | string | null;
      headers?: Record<string, string>;
      /** Straight to the server, for a request Prism answers itself (see below). */
      direct?: boolean;
    } = {},
  ): Promise<Called> {
    const operation = operations.get(operationId);
    assert.ok(operation, `the document has an operation ${operationId}`);
    let path = operation.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = options.params?.[name];
      assert.ok(value !== undefined, `${operationId}: a value for {${name}}`);
      return encodeURIComponent(value);
    });
    if (options.query) path += `?${new URLSearchParams(options.query)}`;
    const key = options.key === undefined ? writer : options.key;
    const token = typeof key === "string" ? key : key?.secret;
    // Through Prism, except what Prism answers itself without asking the server: a request without
    // credentials (its security check runs even with request validation off) and a body that is not
    // JSON sent as JSON (it parses JSON bodies first). Those go to the server directly and are
    // checked by this suite alone.
    const base = token && !options.direct ? prism.url : `${app.url}/api/public/v1`;
    const sent =
      options.raw ??
      (options.body !== undefined
        ? { type: "application/json", body: JSON.stringify(options.body) }
        : undefined);
    const res = await fetch(`${base}${path}`, {
      method: operation.method.toUpperCase(),
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(sent ? { "content-type": sent.type } : {}),
        ...options.headers,
      },
      ...(sent ? { body: sent.body } : {}),
    });
    const text = await res.text();
    const where = `${operation.method.toUpperCase()} ${path} (${operationId})`;
    assert.equal(res.headers.get("sl-violations"), null, `${where}: Prism found the answer undocumented`);
    assert.equal(res.status, expect, `${where}: ${res.status} ${text.slice(0, 600)}`);
    // A file (a statement as CSV or PDF) is read as it is; every other body is JSON.
    const json = /json/.test(res.headers.get("content-type") ?? "application/json");
    const body = text && json ? JSON.parse(text) : text || undefined;
    exercised.add(operationId);
    provoked.add(`${operationId} ${res.status}`);

    // The status is one the document lists for this operation, with this media type and schema.
    const responses = operation.op.responses as Record<string, Json>;
    const documented = responses[String(res.status)];
    assert.ok(documented, `${where}: status ${res.status} is not documented (${Object.keys(responses)})`);
    // Every header is the transport's or one the document names for this answer.
    const named = new Set(
      Object.keys((documented.headers as Json | undefined) ?? {}).map((h) => h.toLowerCase()),
    );
    for (const name of res.headers.keys()) {
      if (TRANSPORT_HEADERS.has(name) || name.startsWith("access-control-")) continue;
      assert.ok(named.has(name), `${where}: the ${res.status} answer's header ${name} is not documented`);
    }
    const content = documented.content as Record<string, { schema: Json }> | undefined;
    if (!content) {
      assert.equal(text, "", `${where}: a ${res.status} documented without content has no body`);
      return { status: res.status, headers: res.headers, body };
    }
    const [mediaType] = Object.keys(content);
    assert.ok(mediaType);
    assert.equal(
      (res.headers.get("content-type") ?? "").split(";")[0],
      mediaType,
      `${where}: the documented media type: ${text.slice(0, 300)}`,
    );
    if (res.status >= 400) {
      assert.equal(mediaType, "application/problem+json", `${where}: errors are problem details`);
      assert.equal(body.status, res.status, `${where}: problem.status`);
      assert.equal(body.request_id, res.headers.get("x-request-id"), `${where}: problem.request_id`);
    }
    if (!json) {
      assert.equal((content[mediaType] as Json).schema && typeof body, "string", `${where}: a file`);
      return { status: res.status, headers: res.headers, body };
    }
    const validate = validatorFor(
      operationId,
      res.status,
      mediaType,
      (content[mediaType] as Json).schema as Json,
    );
    assert.ok(
      validate(body),
      `${where}: the ${res.status} body does not match the documented schema: ${ajv.errorsText(validate.errors)}\n${text.slice(0, 2000)}`,
    );
    return { status: res.status, headers: res.headers, body };
  }

  test("the document is OpenAPI 3.1.0 and names every operation", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.ok(operations.size >= 30, `${operations.size} operations`);
    const ids = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      assert.ok(path.startsWith("/"), path);
      for (const method of METHODS) {
        const op = item[method] as Json | undefined;
        if (!op) continue;
        assert.equal(typeof op.operationId, "string", `${method} ${path} has an operationId`);
        assert.ok(!ids.has(String(op.operationId)), `operationId ${op.operationId} is unique`);
        ids.add(String(op.operationId));
        const responses = op.responses as Record<string, Json>;
        assert.ok(
          Object.keys(responses).some((s) => s.startsWith("2")),
          `${op.operationId} documents a success`,
        );
        for (const [status, r] of Object.entries(responses)) {
          if (Number(status) < 400) continue;
          assert.deepEqual(
            Object.keys((r.content as Json | undefined) ?? {}),
            ["application/problem+json"],
            `${op.operationId} ${status} is problem+json`,
          );
        }
      }
    }
    // Versioning (docs/public-api.md): responses may gain fields, so no response schema forbids
    // unknown ones; requests refuse unknown fields (422 unknown_field), and say so.
    const components = (doc.components as Json).schemas as Json;
    for (const { operationId, op } of operations.values()) {
      for (const [status, r] of Object.entries(op.responses as Record<string, Json>)) {
        const content = (r.content ?? {}) as Record<string, Json>;
        for (const name of reachable(Object.values(content), components)) {
          const text = JSON.stringify(components[name]);
          assert.ok(
            !text.includes('"additionalProperties":false'),
            `${operationId} ${status}: ${name} is open`,
          );
        }
      }
      const body = ((op.requestBody as Json | undefined)?.content as Json | undefined)?.[
        "application/json"
      ] as Json | undefined;
      if (body) {
        const ref = String((body.schema as Json).$ref ?? "");
        assert.ok(ref.startsWith(REF), `${operationId}: the request body is a named schema`);
        assert.equal(
          (components[ref.slice(REF.length)] as Json).additionalProperties,
          false,
          `${operationId}: the request body refuses unknown fields`,
        );
      }
    }
    // A body is required exactly where the server needs one (POST /webhooks/{id}/test needs none).
    for (const r of ROUTES.filter((x) => x.body)) {
      const requestBody = operations.get(r.operationId)?.op.requestBody as Json | undefined;
      assert.equal(requestBody?.required, r.bodyOptional !== true, `${r.operationId}: requestBody.required`);
    }
    assert.equal((operations.get("testWebhook")?.op.requestBody as Json | undefined)?.required, false);
    const servers = doc.servers as { url: string }[];
    assert.equal(servers[0]?.url, `${app.url}/api/public/v1`, "the server is this server's PUBLIC_URL");
  });

  test("GET /docs is the interactive reference over this document", async () => {
    // It renders in the browser (test/portal/api-reference.test.ts opens it in Chromium).
    const res = await fetch(`${app.url}/api/public/v1/docs`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
    assert.match(res.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    const html = await res.text();
    assert.match(html, /data-document="openapi.json"/);
    for (const [, src] of html.matchAll(/<script src="([^"]+)"/g)) {
      const asset = await fetch(`${app.url}${src}`);
      assert.equal(asset.status, 200, String(src));
      await asset.arrayBuffer();
    }
  });

  test("every operation answers as documented, over a whole account's life", async () => {
    const missing = randomUUID();

    // --- Rules --------------------------------------------------------------------------------
    const rules = await call("getRules", 200, { key: reader });
    const genre = rules.body.genres[0].code as string;
    assert.ok(rules.body.stores.some((s: { code: string }) => s.code === "spotify"));

    // --- Authentication and scopes (401, 403) -------------------------------------------------
    const noKey = await call("listReleases", 401, { key: null });
    assert.equal(noKey.body.code, "missing_api_key");
    const unknownKey = await call("listReleases", 401, { key: `bk_live_${"x".repeat(40)}` });
    assert.match(unknownKey.body.code, /^api_key_(unknown|invalid)$/);
    const readOnly = await call("createRelease", 403, { key: reader, body: completeRelease() });
    assert.equal(readOnly.body.code, "insufficient_scope");
    assert.match(readOnly.headers.get("www-authenticate") ?? "", /insufficient_scope/);
    const noKeysScope = await call("listApiKeys", 403);
    assert.equal(noKeysScope.body.code, "insufficient_scope");

    // --- Artists ------------------------------------------------------------------------------
    const luna = await call("createArtist", 201, {
      body: {
        name: "Luna Vale",
        bio: "Synths at night.",
        store_ids: { spotify: "4Z8W4fKeB5YxbusRsdQVPb" },
        platform_links: { website: "https://lunavale.example.org" },
        localized_names: { ja: "ルナ・ヴェイル" },
      },
    });
    assert.equal(luna.body.object, "artist");
    const artistId = luna.body.id as string;
    const badArtist = await call("createArtist", 422, {
      body: { bio: "no name", store_ids: { nowhere: "1" }, extra: true },
    });
    assert.equal(badArtist.body.code, "validation_failed");
    assert.deepEqual(
      new Set(badArtist.body.errors.map((e: { param: string }) => e.param)),
      new Set(["name", "extra", "store_ids.nowhere"]),
    );
    const artists = await call("listArtists", 200, { key: reader, query: { limit: "5" } });
    assert.equal(artists.body.object, "list");
    assert.ok(artists.body.data.some((a: { id: string }) => a.id === artistId));
    await call("getArtist", 200, { key: reader, params: { id: artistId } });
    const noArtist = await call("getArtist", 404, { params: { id: missing } });
    assert.equal(noArtist.body.code, "resource_missing");
    await call("getArtist", 404, { params: { id: "not-a-uuid" } });
    const patched = await call("updateArtist", 200, {
      params: { id: artistId },
      body: { bio: "Synths at dawn.", store_ids: { spotify: "4Z8W4fKeB5YxbusRsdQVPb", deezer: "27" } },
    });
    assert.equal(patched.body.bio, "Synths at dawn.");
    await call("updateArtist", 404, { params: { id: missing }, body: { bio: "x" } });
    await call("updateArtist", 422, { params: { id: artistId }, body: { name: "" } });
    const spare = await call("createArtist", 201, { body: { name: "Spare Artist" } });
    const gone = await call("deleteArtist", 200, { params: { id: spare.body.id } });
    assert.deepEqual(gone.body, { id: spare.body.id, object: "artist", deleted: true });
    await call("deleteArtist", 404, { params: { id: spare.body.id } });

    // Another account's objects are not found (404), whatever the key may do in its own.
    await call("getArtist", 404, { key: otherKey, params: { id: artistId } });

    // --- Releases -----------------------------------------------------------------------------
    const created = await call("createRelease", 201, {
      body: completeRelease({ artist_id: artistId, primary_genre: genre, upc: null }),
    });
    const releaseId = created.body.id as string;
    assert.equal(created.body.status, "draft");
    assert.equal(created.body.object, "release");
    // The checks bite: the documented schema refuses a release that breaks it.
    const releaseSchema = validators.get("createRelease 201 application/json");
    const sample: Json = { ...created.body };
    assert.equal(releaseSchema?.(sample), true);
    assert.equal(releaseSchema?.({ ...sample, status: "misplaced" }), false);
    assert.equal(releaseSchema?.({ ...sample, id: undefined }), false);
    assert.equal(releaseSchema?.({ ...sample, undocumented: 1 }), false, "every field is documented");
    assert.equal(validators.get("createRelease 403 application/problem+json")?.({ code: "x" }), false);
    const invalid = await call("createRelease", 422, {
      body: completeRelease({ territories: ["XX"], services: ["spotify", "nope"], release_type: "lp" }),
    });
    assert.equal(invalid.body.code, "validation_failed");
    assert.ok(invalid.body.errors.length >= 3);
    const unknownArtist = await call("createRelease", 422, {
      body: completeRelease({ artist_id: missing, primary_genre: genre }),
    });
    assert.equal(unknownArtist.body.errors[0].code, "invalid_reference");

    const list = await call("listReleases", 200, { key: reader, query: { status: "draft", limit: "10" } });
    assert.ok(list.body.data.some((r: { id: string }) => r.id === releaseId));
    const badQuery = await call("listReleases", 400, { query: { status: "sideways" } });
    assert.equal(badQuery.body.code, "invalid_parameter");
    await call("listReleases", 400, { query: { limit: "1000" } });
    await call("getRelease", 404, { params: { id: missing } });
    await call("updateRelease", 200, {
      params: { id: releaseId },
      body: { label_name: "Night Owl Records", copyright: "2026 Night Owl Records", copyright_year: 2026 },
    });
    await call("updateRelease", 422, { params: { id: releaseId }, body: { release_date: "tomorrow" } });
    await call("updateRelease", 404, { params: { id: missing }, body: { title: "x" } });

    // An incomplete release cannot be submitted: every problem is listed at once.
    const empty = await call("createRelease", 201, {
      body: { title: "Empty", artist_name: "Luna Vale", release_type: "album" },
    });
    assert.equal(empty.body.artist_id, artistId, "artist_name names the existing profile");
    const incomplete = await call("submitRelease", 422, { params: { id: empty.body.id } });
    assert.equal(incomplete.body.code, "release_incomplete");
    assert.ok(incomplete.body.errors.length >= 1);
    await call("submitRelease", 404, { params: { id: missing } });

    // --- Tracks -------------------------------------------------------------------------------
    const track = await call("createTrack", 201, {
      params: { id: releaseId },
      body: {
        title: "Night Drive",
        isrc: "us-abc-26-00001",
        duration: 215,
        explicit: false,
        language: "en",
        contributors: [
          { name: "Luna Vale", role: "composer", artist_id: artistId },
          { name: "Sam Reed", role: "producer" },
        ],
        splits: [
          { name: "Luna Vale", share: 60.5, email: "luna@example.org" },
          { name: "Sam Reed", share: 39.5 },
        ],
      },
    });
    assert.equal(track.body.isrc, "USABC2600001");
    assert.equal(track.body.track_number, 1);
    const trackId = track.body.id as string;
    const splitsOff = await call("createTrack", 422, {
      params: { id: releaseId },
      body: { title: "B-side", splits: [{ name: "A", share: 50 }] },
    });
    assert.equal(splitsOff.body.errors[0].code, "splits_total");
    const duplicate = await call("createTrack", 409, {
      params: { id: releaseId },
      body: { title: "Night Drive", isrc: "USABC2600001" },
    });
    assert.equal(duplicate.body.code, "duplicate_isrc");
    await call("createTrack", 404, { params: { id: missing }, body: { title: "Nowhere" } });
    const second = await call("createTrack", 201, {
      params: { id: releaseId },
      body: { title: "Interlude" },
    });
    assert.equal(second.body.track_number, 2);
    const taken = await call("updateTrack", 409, {
      params: { id: releaseId, trackId: second.body.id },
      body: { track_number: 1 },
    });
    assert.equal(taken.body.code, "track_number_taken");
    const tracks = await call("listTracks", 200, { key: reader, params: { id: releaseId } });
    assert.deepEqual(
      tracks.body.data.map((x: { id: string }) => x.id),
      [trackId, second.body.id],
    );
    await call("listTracks", 404, { params: { id: missing } });
    await call("getTrack", 200, { key: reader, params: { id: releaseId, trackId } });
    await call("getTrack", 404, { params: { id: releaseId, trackId: missing } });
    const retitled = await call("updateTrack", 200, {
      params: { id: releaseId, trackId },
      body: { version: "Radio Edit", duration: 198 },
    });
    assert.equal(retitled.body.version, "Radio Edit");
    await call("updateTrack", 422, { params: { id: releaseId, trackId }, body: { isrc: "nope" } });
    await call("updateTrack", 404, { params: { id: releaseId, trackId: missing }, body: { title: "x" } });
    await call("deleteTrack", 200, { params: { id: releaseId, trackId: second.body.id } });
    await call("deleteTrack", 404, { params: { id: releaseId, trackId: second.body.id } });

    // --- Uploads -----------------------------------------------------------------------------
    const cover = await artworkJpeg();
    const artworkUrl = await call("createArtworkUploadUrl", 201, {
      params: { id: releaseId },
      body: { filename: "cover.jpg", size: cover.length },
    });
    assert.equal(artworkUrl.body.complete_url, null, "local storage completes uploads itself");
    await call("createArtworkUploadUrl", 403, { key: reader, params: { id: releaseId }, body: {} });
    await call("createArtworkUploadUrl", 404, { params: { id: missing } });
    await call("createArtworkUploadUrl", 422, {
      params: { id: releaseId },
      body: { content_type: "image/gif" },
    });
    await call("createArtworkUploadUrl", 413, { params: { id: releaseId }, body: { size: 10 ** 12 } });
    const pending = await call("getUpload", 200, {
      key: reader,
      params: { assetId: artworkUrl.body.asset_id },
    });
    assert.equal(pending.body.status, "pending");
    const notYet = await call("completeUpload", 409, { params: { assetId: artworkUrl.body.asset_id } });
    assert.equal(notYet.body.code, "upload_not_received");
    const put = await fetch(artworkUrl.body.upload_url, {
      method: artworkUrl.body.method,
      headers: artworkUrl.body.headers,
      body: cover,
    });
    assert.equal(put.status, 200);
    const completed = await call("completeUpload", 200, { params: { assetId: artworkUrl.body.asset_id } });
    assert.equal(completed.body.status, "uploaded");
    await call("getUpload", 404, { params: { assetId: missing } });
    await call("getUpload", 404, { key: otherKey, params: { assetId: artworkUrl.body.asset_id } });
    await call("completeUpload", 404, { params: { assetId: missing } });
    const audioUrl = await call("createAudioUploadUrl", 201, {
      params: { id: releaseId, trackId },
      body: { content_type: "audio/flac" },
    });
    assert.deepEqual(audioUrl.body.headers, { "content-type": "audio/flac" });
    await call("createAudioUploadUrl", 404, { params: { id: releaseId, trackId: missing } });
    await call("createAudioUploadUrl", 422, {
      params: { id: releaseId, trackId },
      body: { content_type: "image/gif" },
    });

    // --- Royalties (none imported yet: empty pages with empty totals) ------------------------
    const royalties = await call("listRoyalties", 200, { query: { from: "2026-01", group_by: "store" } });
    assert.equal(royalties.body.object, "list");
    assert.deepEqual(royalties.body.data, []);
    const badGroup = await call("listRoyalties", 400, { query: { group_by: "planet" } });
    assert.equal(badGroup.body.code, "invalid_parameter");
    assert.equal(
      (await call("listRoyalties", 403, { key: reader })).body.code,
      "insufficient_scope",
      "royalties need royalties:read",
    );
    await call("listReleaseRoyalties", 200, { params: { id: releaseId }, query: { territory: "DE" } });
    await call("listReleaseRoyalties", 404, { params: { id: missing } });

    const detail = await call("getRelease", 200, { key: reader, params: { id: releaseId } });
    const catalogue = await call("exportCatalogue", 200, { key: reader });
    assert.ok(catalogue.body.releases.some((r: { id: string }) => r.id === releaseId));
    assert.equal(detail.body.tracks.length, 1);
    assert.equal(detail.body.artwork.id, artworkUrl.body.asset_id);
    assert.equal(detail.body.artists[0].id, artistId);

    // --- Submission, status, corrections, takedown -------------------------------------------
    const notDelivered = await call("correctReleaseMetadata", 409, {
      params: { id: releaseId },
      body: { label_name: "Dawn Records" },
    });
    assert.equal(notDelivered.body.code, "release_not_delivered");
    const notEligible = await call("requestOfficialArtistChannel", 409, { params: { id: artistId } });
    assert.equal(notEligible.body.code, "oac_not_eligible");
    const noTakedown = await call("requestTakedown", 409, { params: { id: releaseId } });
    assert.equal(noTakedown.body.code, "takedown_not_allowed");

    const ready = await call("getReleaseProblems", 200, { key: reader, params: { id: releaseId } });
    assert.deepEqual([ready.body.ready, ready.body.errors], [true, []]);
    await call("getReleaseProblems", 404, { params: { id: missing } });
    const submitted = await call("submitRelease", 200, { params: { id: releaseId } });
    assert.equal(submitted.body.status, "submitted");
    const again = await call("submitRelease", 409, { params: { id: releaseId } });
    assert.equal(again.body.code, "invalid_status_transition");
    const locked = await call("updateRelease", 409, { params: { id: releaseId }, body: { title: "Late" } });
    assert.equal(locked.body.code, "release_not_editable");
    await call("createTrack", 409, { params: { id: releaseId }, body: { title: "Too late" } });
    await call("deleteTrack", 409, { params: { id: releaseId, trackId } });
    await call("createArtworkUploadUrl", 409, { params: { id: releaseId } });
    await call("createAudioUploadUrl", 409, { params: { id: releaseId, trackId } });
    const inReview = await call("getReleaseStatus", 200, { key: reader, params: { id: releaseId } });
    assert.equal(inReview.body.approval, "in_review");
    assert.equal(inReview.body.live, false);
    await call("getReleaseStatus", 404, { params: { id: missing } });

    await forceReleaseStatus(t().db, releaseId, "delivered");
    const corrected = await call("correctReleaseMetadata", 200, {
      params: { id: releaseId },
      body: { label_name: "Dawn Records", explicit: true },
    });
    assert.equal(corrected.body.label_name, "Dawn Records");
    await call("correctReleaseMetadata", 422, { params: { id: releaseId }, body: { upc: "123" } });
    await call("correctReleaseMetadata", 404, { params: { id: missing }, body: { title: "x" } });
    const delivered = await call("deleteRelease", 409, { params: { id: releaseId } });
    assert.equal(delivered.body.code, "release_delivered");
    const inUse = await call("deleteArtist", 409, { params: { id: artistId } });
    assert.equal(inUse.body.code, "artist_in_use");

    // --- Official Artist Channel --------------------------------------------------------------
    await call("getOfficialArtistChannelRequest", 404, { key: reader, params: { id: artistId } });
    const oac = await call("requestOfficialArtistChannel", 201, {
      params: { id: artistId },
      body: { channel_url: "https://www.youtube.com/@lunavale", note: "Merge the topic channel." },
    });
    assert.equal(oac.body.status, "requested");
    const twice = await call("requestOfficialArtistChannel", 409, { params: { id: artistId } });
    assert.equal(twice.body.code, "oac_already_requested");
    await call("requestOfficialArtistChannel", 404, { params: { id: missing } });
    await call("requestOfficialArtistChannel", 422, {
      params: { id: artistId },
      body: { channel_url: "http://insecure.example.org" },
    });
    const latest = await call("getOfficialArtistChannelRequest", 200, {
      key: reader,
      params: { id: artistId },
    });
    assert.equal(latest.body.id, oac.body.id);

    const takedown = await call("requestTakedown", 202, {
      params: { id: releaseId },
      body: { reason: "Rights dispute." },
    });
    assert.equal(takedown.body.object, "takedown_request");
    const takenTwice = await call("requestTakedown", 409, { params: { id: releaseId } });
    assert.equal(takenTwice.body.code, "takedown_already_requested");
    await call("requestTakedown", 404, { params: { id: missing } });
    await call("requestTakedown", 422, { params: { id: releaseId }, body: { reason: "" } });
    const status = await call("getReleaseStatus", 200, { params: { id: releaseId } });
    assert.equal(status.body.status, "takedown_requested");
    assert.equal(status.body.takedown.id, takedown.body.id);

    // A release that never went anywhere can be deleted, once.
    const deleted = await call("deleteRelease", 200, { params: { id: empty.body.id } });
    assert.deepEqual(deleted.body, { id: empty.body.id, object: "release", deleted: true });
    await call("deleteRelease", 404, { params: { id: empty.body.id } });

    // --- API keys -----------------------------------------------------------------------------
    const keys = await call("listApiKeys", 200, { key: manager });
    assert.ok(keys.body.data.some((k: { id: string }) => k.id === writer.id));
    assert.ok(!JSON.stringify(keys.body).includes(writer.secret), "secrets are never listed");
    await call("listApiKeys", 400, { key: manager, query: { account_id: "nope" } });
    const got = await call("getApiKey", 200, { key: manager, params: { id: writer.id } });
    assert.equal(got.body.status, "active");
    await call("getApiKey", 404, { key: manager, params: { id: otherKey.id } });

    const newKey = await call("createApiKey", 201, {
      key: manager,
      body: { name: "CI deploys", scopes: ["catalog:read"] },
    });
    assert.equal(newKey.body.status, "pending_reveal");
    assert.equal(newKey.body.verification.sent_to.length, 1);
    await call("createApiKey", 422, { key: manager, body: { scopes: [] } });
    const newId = newKey.body.id as string;
    const resent = await call("resendApiKeyVerification", 201, { key: manager, params: { id: newId } });
    assert.equal(resent.body.sent_to.length, 1);
    await call("resendApiKeyVerification", 404, { key: manager, params: { id: missing } });
    const code = await revealCode(newId);
    const wrong = await call("revealApiKey", 422, {
      key: manager,
      params: { id: newId },
      body: { code: code === "000000" ? "111111" : "000000" },
    });
    assert.equal(wrong.body.code, "verification_code_invalid");
    await call("revealApiKey", 422, { key: manager, params: { id: newId }, body: { code: "12ab" } });
    const revealed = await call("revealApiKey", 200, { key: manager, params: { id: newId }, body: { code } });
    assert.equal(revealed.body.status, "active");
    const secret = revealed.body.secret as string;
    const revealedTwice = await call("revealApiKey", 409, {
      key: manager,
      params: { id: newId },
      body: { code },
    });
    assert.equal(revealedTwice.body.code, "api_key_already_revealed");
    await call("resendApiKeyVerification", 409, { key: manager, params: { id: newId } });
    await call("getRules", 200, { key: secret });

    const frozen = await call("freezeApiKey", 200, { key: manager, params: { id: newId } });
    assert.equal(frozen.body.status, "frozen");
    const refused = await call("getRules", 401, { key: secret });
    assert.equal(refused.body.code, "api_key_frozen");
    await call("freezeApiKey", 404, { key: manager, params: { id: missing } });
    const thawed = await call("unfreezeApiKey", 200, { key: manager, params: { id: newId } });
    assert.equal(thawed.body.status, "active");
    await call("getRules", 200, { key: secret });
    await call("unfreezeApiKey", 404, { key: manager, params: { id: otherKey.id } });
    const revoked = await call("revokeApiKey", 200, { key: manager, params: { id: newId } });
    assert.equal(revoked.body.status, "revoked");
    const revokedUse = await call("getRules", 401, { key: secret });
    assert.equal(revokedUse.body.code, "api_key_revoked");
    const thawRevoked = await call("unfreezeApiKey", 409, { key: manager, params: { id: newId } });
    assert.equal(thawRevoked.body.code, "invalid_status_transition");
    await call("revokeApiKey", 404, { key: manager, params: { id: missing } });
    await call("revokeApiKey", 200, { key: manager, params: { id: newId } });
    const foreign = await call("createApiKey", 404, {
      key: manager,
      body: { name: "Elsewhere", scopes: ["catalog:read"], account_id: other.id },
    });
    assert.equal(foreign.body.code, "resource_missing");

    // --- Webhooks -----------------------------------------------------------------------------
    const hook = await call("createWebhook", 201, {
      body: { url: "https://93.184.216.34/backline", events: ["release.live", "release.rejected"] },
    });
    assert.match(hook.body.secret as string, /^whsec_/);
    const hookId = hook.body.id as string;
    await call("createWebhook", 422, { body: { url: "https://93.184.216.34/x", events: ["nope"] } });
    await call("createWebhook", 403, {
      key: reader,
      body: { url: "https://93.184.216.34/x", events: ["release.live"] },
    });
    const hooks = await call("listWebhooks", 200);
    assert.deepEqual(
      hooks.body.data.map((h: { id: string; secret?: string }) => [h.id, h.secret]),
      [[hookId, undefined]],
    );
    await call("getWebhook", 200, { params: { id: hookId } });
    await call("getWebhook", 404, { params: { id: missing } });
    const paused = await call("updateWebhook", 200, { params: { id: hookId }, body: { enabled: false } });
    assert.equal(paused.body.enabled, false);
    await call("updateWebhook", 422, { params: { id: hookId }, body: { events: [] } });
    await call("updateWebhook", 404, { params: { id: missing }, body: { enabled: true } });
    const rotated = await call("rotateWebhookSecret", 200, {
      params: { id: hookId },
      body: { previous_secret_hours: 1 },
    });
    assert.notEqual(rotated.body.secret, hook.body.secret);
    await call("rotateWebhookSecret", 404, { params: { id: missing } });
    const tested = await call("testWebhook", 202, { params: { id: hookId } });
    assert.equal(tested.body.event_type, "webhook.test");
    await call("testWebhook", 404, { params: { id: missing } });
    const log = await call("listWebhookDeliveries", 200, {
      params: { id: hookId },
      query: { status: "pending" },
    });
    assert.deepEqual(
      log.body.data.map((d: { id: string }) => d.id),
      [tested.body.id],
    );
    await call("listWebhookDeliveries", 404, { params: { id: missing } });
    await call("retryWebhookDelivery", 202, { params: { id: hookId, deliveryId: tested.body.id } });
    await call("retryWebhookDelivery", 404, { params: { id: hookId, deliveryId: missing } });
    await call("deleteWebhook", 200, { params: { id: hookId } });
    await call("deleteWebhook", 404, { params: { id: hookId } });

    // --- Money -------------------------------------------------------------------------------
    // A delivered track whose split names the payee, a report the ledger allocates, an approved
    // period: the account reads it with payouts:read, the payee with their own token.
    const payoutsKey = await issueTestKey(t().db, account, { name: "payouts", scopes: ["payouts:read"] });
    const paid = await seedDeliveredRelease(t().db, account.id, { title: "Paid Out", upc: "012345000027" }, [
      { title: "Paid Out", isrc: "QZCON2600001", duration: 200, track_number: 1 },
    ]);
    await t().db.asService((tx) =>
      tx.query("update public.tracks set splits = $2 where id = $1", [
        paid.tracks[0]?.id,
        JSON.stringify([{ name: "Pay Ee", email: payee.email, share: "100" }]),
      ]),
    );
    await updateMoneySettings(t().db, tenant.id, { payout_threshold: "1" });
    const report = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          "2026-11,2026-10,spotify,US,012345000027,QZCON2600001,stream,1000,9.00,1.50,7.50,USD",
          "",
        ].join("\n"),
      ),
    });
    assert.equal(report.status, "completed");
    const month = new Date().toISOString().slice(0, 7);
    // The open period's statement, before the operator approves it.
    const myPayees = await call("listMyPayees", 200, { key: payeeToken });
    const payeeId = myPayees.body.data[0].id as string;
    for (const id of ["getMyDraftStatement", "getMyDraftStatementCsv", "getMyDraftStatementPdf"]) {
      await call(id, 200, { key: payeeToken, params: { id: payeeId } });
    }
    await approvePeriod(t().db, tenant.id, month, "contract");
    const payees = await call("listPayees", 200, { key: payoutsKey });
    assert.ok(payees.body.data.some((p: { id: string }) => p.id === payeeId));
    await call("getPayee", 200, { key: payoutsKey, params: { id: payeeId } });
    await call("getPayee", 404, { key: payoutsKey, params: { id: missing } });
    await call("listPayees", 403, { key: reader });
    const owed = await call("listBalances", 200, { key: payoutsKey, query: { payee_id: payeeId } });
    assert.ok(owed.body.data.length > 0);
    const statements = await call("listStatements", 200, { key: payoutsKey, query: { period: month } });
    const statementId = statements.body.data[0].id as string;
    for (const id of ["getStatement", "getStatementCsv", "getStatementPdf"]) {
      await call(id, 200, { key: payoutsKey, params: { id: statementId } });
    }
    await call("getStatement", 404, { key: payoutsKey, params: { id: missing } });
    await call("listMyBalances", 200, { key: payeeToken });
    const mine = await call("exportMyData", 200, { key: payeeToken });
    assert.equal(mine.body.format, "backline.person-export");
    await call("listMyStatements", 200, { key: payeeToken });
    for (const id of ["getMyStatement", "getMyStatementCsv", "getMyStatementPdf"]) {
      await call(id, 200, { key: payeeToken, params: { id: statementId } });
    }
    // An approved statement never changes: the account and the payee get the same text and ETag,
    // and 304 without the body when they already hold it.
    const byAccount = await call("getStatement", 200, { key: payoutsKey, params: { id: statementId } });
    const byPayee = await call("getMyStatement", 200, { key: payeeToken, params: { id: statementId } });
    const statementTag = byAccount.headers.get("etag");
    assert.match(statementTag ?? "", new RegExp(`^"${statementId}-[A-Za-z0-9_-]{16}"$`));
    assert.equal(byPayee.headers.get("etag"), statementTag);
    assert.deepEqual(byPayee.body, byAccount.body);
    assert.equal(byAccount.body.id, statementId);
    for (const [id, key] of [
      ["getStatement", payoutsKey],
      ["getMyStatement", payeeToken],
    ] as const) {
      // Straight to the server: Prism's proxy mishandles a 304 passed through it (the next
      // answers on its connection go astray).
      const same = await call(id, 304, {
        key,
        params: { id: statementId },
        headers: { "if-none-match": statementTag ?? "" },
        direct: true,
      });
      assert.equal(same.headers.get("etag"), statementTag);
      await call(id, 200, { key, params: { id: statementId }, headers: { "if-none-match": '"other-tag"' } });
    }
    const keyRefused = await call("listMyPayees", 403, { key: payoutsKey });
    assert.equal(keyRefused.body.code, "person_required");
    // Getting paid: a tax form the operator verifies, a payout method, then the request.
    const noForm = await call("requestPayout", 422, { key: payeeToken, params: { id: payeeId }, body: {} });
    assert.equal(noForm.body.code, "tax_form_required");
    await call("fileTaxForm", 422, { key: payeeToken, params: { id: payeeId }, body: { form: "W-2" } });
    const filed = await call("fileTaxForm", 200, {
      key: payeeToken,
      params: { id: payeeId },
      body: { form: "W-9", name: "Pay Ee", country: "US", tax_id: "123-45-6789" },
    });
    assert.equal(JSON.stringify(filed.body).includes("123-45-6789"), false, "the tax id is never shown");
    await reviewTaxForm(t().db, tenant.id, payeeId, { status: "verified" });
    await call("setPayoutMethod", 422, {
      key: payeeToken,
      params: { id: payeeId },
      body: { method: { provider: "paypal", receiver: "not an address" } },
    });
    await call("setPayoutMethod", 200, {
      key: payeeToken,
      params: { id: payeeId },
      body: { method: { provider: "paypal", receiver: payee.email } },
    });
    const payout = await call("requestPayout", 201, { key: payeeToken, params: { id: payeeId }, body: {} });
    assert.equal(payout.body.status, "requested");
    const open = await call("requestPayout", 409, { key: payeeToken, params: { id: payeeId }, body: {} });
    assert.equal(open.body.code, "payout_open");
    await call("requestPayout", 404, { key: payeeToken, params: { id: missing }, body: {} });
    const listedPayouts = await call("listPayouts", 200, { key: payoutsKey });
    assert.deepEqual(
      listedPayouts.body.data.map((o: { id: string }) => o.id),
      [payout.body.id],
    );
    await call("listMyPayouts", 200, { key: payeeToken });

    // --- Transfers -----------------------------------------------------------------------------
    const transferCsv =
      "release_ref,upc,release_title,release_artist,original_release_date,isrc,track_number,track_title\n" +
      "T1,036000291452,Contract Transfer,Contract Artist,2015-03-01,QZ-CT1-15-00001,1,One\n";
    const slot = await call("createTransferUpload", 201, {
      body: { filename: "catalogue.csv", size: transferCsv.length },
    });
    assert.equal(slot.body.upload.status, "pending");
    await call("createTransferUpload", 413, { body: { filename: "big.csv", size: 10 ** 12 } });
    await call("createTransferUpload", 422, { body: { content_type: "text/html" } });
    const notReceived = await call("createTransfer", 409, { body: { upload_id: slot.body.upload_id } });
    assert.equal(notReceived.body.code, "upload_not_received");
    const sent = await fetch(slot.body.upload_url, {
      method: slot.body.method,
      headers: slot.body.headers,
      body: transferCsv,
    });
    assert.equal(sent.status, 200);
    const arrived = await call("getTransferUpload", 200, {
      key: reader,
      params: { id: slot.body.upload_id },
    });
    assert.equal(arrived.body.status, "uploaded");
    await call("getTransferUpload", 404, { key: otherKey, params: { id: slot.body.upload_id } });
    const queued = await call("createTransfer", 202, {
      body: { upload_id: slot.body.upload_id, dry_run: true },
    });
    assert.equal(queued.body.status, "queued");
    await call("createTransfer", 404, { body: { upload_id: missing } });
    await call("createTransfer", 422, { body: { upload_id: "nope" } });
    // The worker's part, run here: the transfer then reads as completed, with its counts.
    await runTransferJob(t().db, queued.body.id);
    const ran = await call("getTransfer", 200, { key: reader, params: { id: queued.body.id } });
    assert.equal(ran.body.status, "completed");
    assert.equal(ran.body.counts.tracks_created, 1);
    await call("getTransfer", 404, { key: otherKey, params: { id: queued.body.id } });
    const transfers = await call("listTransfers", 200, { key: reader, query: { limit: "1" } });
    assert.deepEqual(
      transfers.body.data.map((x: { id: string }) => x.id),
      [queued.body.id],
    );

    // --- Support -------------------------------------------------------------------------------
    const ticket = await call("createTicket", 201, {
      body: { subject: "Where is my statement?", body: "It was due last week." },
    });
    assert.equal(ticket.body.status, "open");
    const notOurs = await call("createTicket", 422, {
      body: { subject: "x", body: "y", about: { type: "release", id: missing } },
    });
    assert.equal(notOurs.body.param, "about.id");
    await call("createTicket", 403, { key: reader, body: { subject: "x", body: "y" } });
    const tickets = await call("listTickets", 200, { key: reader, query: { status: "open" } });
    assert.ok(tickets.body.data.some((x: { id: string }) => x.id === ticket.body.id));
    await call("getTicket", 200, { key: reader, params: { id: ticket.body.id } });
    await call("getTicket", 404, { key: otherKey, params: { id: ticket.body.id } });
    await call("replyToTicket", 201, { params: { id: ticket.body.id }, body: { body: "Any news?" } });
    await call("replyToTicket", 404, { key: otherKey, params: { id: ticket.body.id }, body: { body: "x" } });
    await call("replyToTicket", 422, { params: { id: ticket.body.id }, body: { body: "" } });

    // --- Add-ons -------------------------------------------------------------------------------
    await t().db.asService((tx) =>
      tx.query(
        `insert into internal.add_on_settings (tenant_id, add_on, name, price, currency, billing, effect, enabled)
         values ($1, 'content_id', 'Content ID', '4.99', 'USD', 'per_year', 'informational', true)`,
        [tenant.id],
      ),
    );
    const onSale = await call("listAddOns", 200, { key: reader });
    assert.deepEqual(
      onSale.body.data.map((a: { code: string; price: string }) => [a.code, a.price]),
      [["content_id", "4.99"]],
    );
    const forAddOn = await call("createRelease", 201, { body: completeRelease({ title: "Add-on" }) });
    const order = await call("buyReleaseAddOn", 200, {
      params: { id: forAddOn.body.id },
      body: { add_on: "content_id" },
    });
    assert.equal(order.body.price, "4.99");
    await call("buyReleaseAddOn", 403, {
      key: reader,
      params: { id: forAddOn.body.id },
      body: { add_on: "content_id" },
    });
    await call("buyReleaseAddOn", 404, { params: { id: missing }, body: { add_on: "content_id" } });
    await call("buyReleaseAddOn", 422, { params: { id: forAddOn.body.id }, body: { add_on: "nothing" } });
    const orders = await call("listReleaseAddOns", 200, { key: reader, params: { id: forAddOn.body.id } });
    assert.deepEqual(
      orders.body.data.map((o: { id: string }) => o.id),
      [order.body.id],
    );
    await call("listReleaseAddOns", 404, { key: otherKey, params: { id: forAddOn.body.id } });

    // --- Coverage -----------------------------------------------------------------------------
    const notCalled = [...operations.keys()].filter((id) => !exercised.has(id));
    assert.deepEqual(notCalled, [], "every operation of the document was called");
  });

  test("every error a route's spec documents is answered as documented, operation by operation", async () => {
    const all = [...operations.values()];
    const scopeOf = (o: Operation) =>
      String(((o.op.security as Json[])[0]?.apiKey as string[] | undefined)?.[0] ?? "");
    const pathIds = (o: Operation, value: () => string) =>
      Object.fromEntries([...o.path.matchAll(/\{([^}]+)\}/g)].map((m) => [m[1] as string, value()]));
    const ALL = [
      "catalog:read",
      "catalog:write",
      "royalties:read",
      "payouts:read",
      "webhooks:manage",
      "keys:manage",
    ];
    const everything = await issueTestKey(t().db, account, { name: "everything", scopes: ALL });
    /** A person's own route (/me): only their access token gets past the door. */
    const personal = (o: Operation) => (o.op.security as Json[]).every((s) => !("apiKey" in s));
    const fullCaller = (o: Operation) => (personal(o) ? payeeToken : everything);
    const royaltiesOnly = await issueTestKey(t().db, account, {
      name: "royalties",
      scopes: ["royalties:read"],
    });

    // The proxy bites: an answer the document does not list is reported in sl-violations (Prism's
    // copy of the document has one operation more, PRISM_PROBE, documenting only a 200: the server,
    // which has no such route, answers 404).
    const undocumented = await fetch(`${prism.url}${PRISM_PROBE}`, {
      headers: { authorization: `Bearer ${writer.secret}` },
    });
    assert.equal(undocumented.status, 404);
    assert.match(undocumented.headers.get("sl-violations") ?? "", /Unable to match the returned status code/);

    for (const o of all) {
      const key = scopeOf(o) === "royalties:read" ? reader : royaltiesOnly;
      // 403: a key without the operation's scope, whatever else it may do.
      const refused = await call(o.operationId, 403, { key, params: pathIds(o, randomUUID) });
      if (personal(o)) {
        assert.equal(refused.body.code, "person_required", o.operationId);
      } else {
        assert.equal(refused.body.code, "insufficient_scope", o.operationId);
        assert.match(refused.headers.get("www-authenticate") ?? "", /insufficient_scope/);
      }
      // 401: a key that is no key, each from its own address (the per-address limit on failures).
      const unknown = await call(o.operationId, 401, {
        key: `bk_live_${"x".repeat(40)}`,
        params: pathIds(o, randomUUID),
        headers: { "x-forwarded-for": `198.51.100.${all.indexOf(o) + 1}` },
      });
      assert.match(unknown.body.code, /^api_key_(unknown|invalid)$/);
      assert.match(unknown.headers.get("www-authenticate") ?? "", /^Bearer /);
      // 404: a path id that names nothing (it is not even an id).
      if (o.path.includes("{")) {
        const none = await call(o.operationId, 404, {
          key: fullCaller(o),
          params: pathIds(o, () => "not-an-id"),
        });
        assert.equal(none.body.code, "resource_missing", o.operationId);
      }
      // 400: a Backline-Account header that names no account id (any operation acting for an
      // account; a person's own routes take no such header).
      const params = pathIds(o, randomUUID);
      if (!personal(o)) {
        const badAccount = await call(o.operationId, 400, {
          key: everything,
          params,
          headers: { "backline-account": "not-an-account" },
        });
        assert.equal(badAccount.body.param, "Backline-Account", o.operationId);
      }
      // 400: a body that is not JSON, sent as JSON, wherever a body is read (every method but GET).
      if (((o.op.parameters as Json[] | undefined) ?? []).some((p) => p.in === "query")) {
        const badQuery = await call(o.operationId, 400, {
          key: fullCaller(o),
          params,
          query: { nonsense: "1" },
        });
        assert.equal(badQuery.body.code, "invalid_parameter", o.operationId);
      }
      if (o.method !== "get") {
        const badJson = await call(o.operationId, 400, {
          key: fullCaller(o),
          params,
          direct: true,
          raw: { type: "application/json", body: '{"title": ' },
        });
        assert.equal(badJson.body.code, "invalid_json", o.operationId);
      }
      if (o.method === "get") continue;
      // 415, 413: the body itself, before the route looks at it; on every method whose body is
      // read, whether or not the operation takes one (POST /releases/{id}/submit, a DELETE).
      const text = await call(o.operationId, 415, {
        key: fullCaller(o),
        params,
        raw: { type: "text/plain", body: "x" },
      });
      assert.equal(text.body.code, "unsupported_media_type", o.operationId);
      const large = await call(o.operationId, 413, {
        key: fullCaller(o),
        params,
        raw: { type: "application/json", body: JSON.stringify({ title: "x".repeat(1024 * 1024) }) },
      });
      assert.equal(large.body.code, "body_too_large", o.operationId);
    }

    // 429: past the per-address limit on credentials that identify nobody (30 a minute).
    // Its windows are whole minutes: an address is blocked for the rest of the minute it failed in,
    // so a call that might reach the next minute first waits for it and blocks a fresh address.
    let blocked = { address: "", until: 0 };
    const block = async () => {
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 5_000) await new Promise((r) => setTimeout(r, left + 50));
      const address = `203.0.113.${Math.floor(Date.now() / 60_000) % 250}`;
      for (let i = 0; i < 30; i++) {
        await call("getRules", 401, {
          key: `bk_live_${"y".repeat(40)}`,
          headers: { "x-forwarded-for": address },
        });
      }
      blocked = { address, until: Math.ceil(Date.now() / 60_000) * 60_000 };
    };
    for (const o of all) {
      if (blocked.until - Date.now() < 2_000) await block();
      const byAddress = await call(o.operationId, 429, {
        key: `bk_live_${"y".repeat(40)}`,
        params: pathIds(o, randomUUID),
        headers: { "x-forwarded-for": blocked.address },
      });
      assert.equal(byAddress.body.code, "rate_limited");
      assert.ok(Number(byAddress.headers.get("retry-after")) > 0);
    }
    // 429: past a key's own limit (one call an hour), with the limit's headers.
    const stingy = await tenantWithKeys(t(), {
      settings: { public_api_rate_limit: { max: 1, windowSeconds: 3600 } },
    });
    const stingyKey = await issueTestKey(t().db, await seedAccount(t().db, stingy.tenant, "Stingy"));
    await call("getRules", 200, { key: stingyKey });
    const byKey = await call("getRules", 429, { key: stingyKey });
    assert.ok(Number(byKey.headers.get("retry-after")) > 0);
    assert.match(byKey.headers.get("ratelimit") ?? "", /r=0/);

    // 503: every operation, while the database's connections are all taken, past the bounded wait.
    // A key not used before, so each call needs the database before anything else.
    const cold = await issueTestKey(t().db, account, { name: "cold", scopes: ALL });
    // The connections are held until every answer is in, however slowly the requests arrive.
    const slots = t().kind === "pglite" ? 1 : 5;
    let free = () => {};
    const released = new Promise<void>((r) => {
      free = r;
    });
    let taken = 0;
    let allTaken = () => {};
    const ready = new Promise<void>((r) => {
      allTaken = r;
    });
    const held = Promise.all(
      Array.from({ length: slots }, () =>
        t().db.asService(async (tx) => {
          await tx.query("select 1");
          if (++taken === slots) allTaken();
          await released;
        }),
      ),
    );
    await ready;
    try {
      const busy = await Promise.all(
        all.map((o) => call(o.operationId, 503, { key: cold, params: pathIds(o, randomUUID) })),
      );
      for (const b of busy) assert.equal(b.headers.get("retry-after"), "1");
    } finally {
      free();
      await held;
    }

    // 304 and 412: the conditional reads and writes of releases, tracks and artists.
    const artist = await call("createArtist", 201, { key: everything, body: { name: "Etag Artist" } });
    const release = await call("createRelease", 201, {
      key: everything,
      body: { title: "Etag", artist_name: "Etag Artist", release_type: "single" },
    });
    const track = await call("createTrack", 201, {
      key: everything,
      params: { id: release.body.id },
      body: { title: "Etag Track" },
    });
    const stale = { "if-match": '"1-AAAAAAAAAAAAAAAA"' };
    const objects: [string, Record<string, string>, unknown][] = [
      ["Artist", { id: artist.body.id }, { bio: "x" }],
      ["Release", { id: release.body.id }, { title: "y" }],
      ["Track", { id: release.body.id, trackId: track.body.id }, { title: "z" }],
    ];
    for (const [what, params, change] of objects) {
      const got = await call(`get${what}`, 200, { key: everything, params });
      const etag = got.headers.get("etag");
      assert.ok(etag, `get${what} answers an ETag`);
      await call(`get${what}`, 304, { key: everything, params, headers: { "if-none-match": etag } });
      const conflict = await call(`update${what}`, 412, {
        key: everything,
        params,
        body: change,
        headers: stale,
      });
      assert.equal(conflict.body.code, "precondition_failed");
      await call(`delete${what}`, 412, { key: everything, params, headers: stale });
    }

    // Idempotency-Key: a replay says so; the same key with another request is 422.
    const once = { "idempotency-key": `contract-${randomUUID()}` };
    const first = await call("createArtist", 201, { key: everything, body: { name: "Once" }, headers: once });
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const replayed = await call("createArtist", 201, {
      key: everything,
      body: { name: "Once" },
      headers: once,
    });
    assert.equal(replayed.headers.get("idempotent-replayed"), "true");
    assert.equal(replayed.body.id, first.body.id);
    const reused = await call("createArtist", 422, {
      key: everything,
      body: { name: "Twice" },
      headers: once,
    });
    assert.equal(reused.body.code, "idempotency_key_reused");

    // Every POST honouring Idempotency-Key: a first request still running (409, Retry-After), and
    // the key reused with another request (422). The first request's claim is written as the server
    // writes it (src/public-api/idempotency.ts), so no race is needed to meet it.
    for (const o of all.filter((x) => x.method === "post")) {
      const honoured = ((o.op.parameters as Json[] | undefined) ?? []).some((p) =>
        String(p.$ref).endsWith("/IdempotencyKey"),
      );
      if (!honoured) continue;
      const params = pathIds(o, randomUUID);
      const url = `/api/public/v1${o.path.replace(/\{([^}]+)\}/g, (_, n: string) => params[n] ?? "")}`;
      const spec = ROUTES.find((r) => r.operationId === o.operationId);
      // The body is validated before the key is looked at: a valid one where a body is required.
      const body = (o.op.requestBody as Json | undefined)?.required ? VALID_BODIES[o.operationId] : undefined;
      assert.ok(
        body || !(o.op.requestBody as Json | undefined)?.required,
        `a valid body for ${o.operationId}`,
      );
      const caller = personal(o) ? { key: payeeToken, owner: `user:${payee.id}` } : undefined;
      for (const [expect, hash, code] of [
        [
          409,
          requestHash("POST", url, body, spec?.secretInResponse ? everything.id : undefined),
          "idempotency_request_in_progress",
        ],
        [422, "another request", "idempotency_key_reused"],
      ] as const) {
        const key = `contract-${randomUUID()}`;
        await t().db.asService((tx) =>
          tx.query(
            `insert into internal.idempotency_keys (owner, method, path, key, request_hash, locked_until)
             values ($1, 'POST', $2, $3, $4, now() + interval '1 minute')`,
            [caller?.owner ?? `account:${account.id}`, url, key, hash],
          ),
        );
        const r = await call(o.operationId, expect, {
          key: caller?.key ?? everything,
          params,
          ...(body ? { body } : {}),
          headers: { "idempotency-key": key },
        });
        assert.equal(r.body.code, code, o.operationId);
        if (expect === 409) assert.equal(r.headers.get("retry-after"), "1");
      }
    }

    // Every documented answer was seen, but for 500 and 504, which no request provokes on purpose
    // (a bug; a statement past its timeout), whose shape the other errors' checks cover.
    const unprovoked: string[] = [];
    for (const o of all) {
      for (const status of Object.keys(o.op.responses as Json)) {
        if (status === "500" || status === "504") continue;
        if (!provoked.has(`${o.operationId} ${status}`)) unprovoked.push(`${o.operationId} ${status}`);
      }
    }
    assert.deepEqual(unprovoked, [], "every documented answer was provoked and checked");
  });

  /** The six-digit code of the latest reveal mail for a key (the local mailbox: no SMTP in tests). */
  async function revealCode(keyId: string): Promise<string> {
    const prefix = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ text_body: string }>(
            `select text_body from internal.mail_outbox where kind = 'api_key.reveal'
             order by created_at desc, id desc limit 1`,
          )
        ).rows[0]?.text_body,
    );
    const m = /Verification code: ([0-9]{6})/.exec(prefix ?? "");
    assert.ok(m?.[1], `a reveal code was mailed for ${keyId}`);
    return m[1];
  }
});
