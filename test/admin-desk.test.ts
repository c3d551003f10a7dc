import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import { after, before, describe, test } from "node:test";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { asDbError } from "../src/db/errors.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg, wav } from "./support/media-fixtures.ts";
import {
  type ApiResponse,
  assertProblem,
  completeRelease,
  expectStatus,
  isrcs,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import {
  seedAccount,
  seedStaffUser,
  seedUser,
  tenantServiceClaims,
  userClaims,
  userToken,
} from "./support/seed.ts";
import { artworkUrl, audioUrl, judged } from "./support/uploads.ts";

/**
 * The operator's desk over /admin/v1 (src/admin/desk.ts, docs/operator.md "Admin API"): the review
 * page with its signed media, the correction diff, pages of every list, deliveries across the
 * tenant with errors first, takedowns, jobs and their retry, a royalty import's progress while it
 * runs, accounts, stores (credentials write-only) and settings. Every answer is checked against the
 * OpenAPI document the server serves (closed: no undocumented field). Real HTTP, a real worker,
 * releases and uploads made through the public API; staff users' tokens as /auth/v1 signs them.
 */

// ajv-formats is CommonJS: its default export is the function itself, or under .default.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

type Obj = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: answers are checked against the document, then read freely.
type Any = any;
type Role = "reviewer" | "operator" | "admin";
type Who = { serviceKey: string } | { token: string; anonKey: string };

const nextIsrc = isrcs("QZDSK");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REF = "#/components/schemas/";
const BASE = "urn:backline:admin:schemas";

/** `#/components/schemas/X` into one schema holding them all; every object closed to undocumented fields. */
function rebase(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rebase);
  if (node && typeof node === "object") {
    const out: Obj = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] =
        k === "$ref" && typeof v === "string" && v.startsWith(REF)
          ? `${BASE}#/$defs/${v.slice(REF.length)}`
          : rebase(v);
    }
    if (out.type === "object" && out.properties && out.additionalProperties === undefined)
      out.additionalProperties = false;
    return out;
  }
  return node;
}

async function poll<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline)
      assert.fail(`timed out waiting for ${what}; last seen: ${JSON.stringify(value)}`);
    await sleep(25);
  }
}

describeEachEngine("admin API: the operator's desk", (t) => {
  const db = () => t().db;
  const rows = <T extends Obj>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);

  describe("over HTTP, with a worker", () => {
    let app: RunningApp;
    let worker: Worker;
    let doc: Any;
    const validators = new Map<string, ValidateFunction>();
    const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
    addFormats(ajv);
    ajv.addKeyword({ keyword: "example", schemaType: ["string", "number", "boolean", "object", "array"] });
    ajv.addKeyword({ keyword: "x-staff-role" });

    const tag = randomBytes(4).toString("hex");
    const store = { ok: `dsk_ok_${tag}`, fail: `dsk_fail_${tag}`, conf: `dsk_conf_${tag}` };
    let a: { tenant: Tenant; keys: TenantKeys };
    let b: { tenant: Tenant; keys: TenantKeys };
    let apiA: ReturnType<typeof publicApi>;
    let apiB: ReturnType<typeof publicApi>;
    let accountA: { id: string };

    before(async () => {
      await db().asService(async (tx) => {
        const settings: Record<string, Obj> = {
          [store.ok]: { adapter: "sandbox" },
          [store.fail]: { adapter: "sandbox", sandbox: { fail: "Audio is mono" } },
          [store.conf]: { adapter: "sandbox" },
        };
        for (const [code, s] of Object.entries(settings)) {
          await tx.query(
            "insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)",
            [code, `Store ${code}`, JSON.stringify(s)],
          );
        }
      });
      app = await startApp(t());
      const storage = openStorage(app.config, loadSecretBox(app.config));
      worker = new Worker({
        db: db(),
        handlers: pipelineHandlers(db(), { store: storage.store }),
        pollMs: 20,
      });
      worker.start();
      const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
      a = await tenantWithKeys(t(), { settings });
      b = await tenantWithKeys(t(), { settings });
      const ka = await keyedAccount(db(), { tenant: a.tenant });
      accountA = ka.account;
      apiA = publicApi(app.url, ka.key.secret);
      apiB = publicApi(app.url, (await keyedAccount(db(), { tenant: b.tenant })).key.secret);

      const res = await fetch(`${app.url}/admin/v1/openapi.json`);
      assert.equal(res.status, 200, "the document needs no key");
      doc = await res.json();
      ajv.addSchema({ $id: BASE, $defs: rebase(doc.components.schemas) as Obj });
    });
    after(async () => {
      await worker?.stop();
      await app?.close();
    });

    /** Checks an answer against the document's schema for the operation at `method path`. */
    function conforms(method: string, path: string, res: ApiResponse<unknown>) {
      const op = doc.paths[path]?.[method.toLowerCase()];
      assert.ok(op, `the document has ${method} ${path}`);
      const content = op.responses[String(res.status)]?.content;
      assert.ok(content, `${method} ${path} documents ${res.status}`);
      const [type, media] = Object.entries(content)[0] as [string, Any];
      const key = `${method} ${path} ${res.status}`;
      let v = validators.get(key);
      if (!v) {
        v = ajv.compile(rebase(media.schema) as Obj);
        validators.set(key, v);
      }
      assert.ok(
        v(res.body),
        `${key} (${type}): ${JSON.stringify(v.errors)} in ${JSON.stringify(res.body).slice(0, 400)}`,
      );
    }

    async function call<T = Any>(
      who: Who,
      method: string,
      path: string,
      options: { body?: unknown; tenant?: string; doc?: string } = {},
    ): Promise<ApiResponse<T>> {
      const headers: Record<string, string> =
        "serviceKey" in who
          ? { apikey: who.serviceKey }
          : { apikey: who.anonKey, authorization: `Bearer ${who.token}` };
      if (options.tenant) headers["backline-tenant"] = options.tenant;
      if (options.body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(`${app.url}/admin/v1${path}`, {
        method,
        headers,
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      });
      const text = await res.text();
      const out = {
        status: res.status,
        headers: res.headers,
        body: (text ? JSON.parse(text) : undefined) as T,
      };
      // Each answer, error or not, is what the document says (the path as the document names it).
      if (options.doc) conforms(method, options.doc, out);
      return out;
    }

    const A = (): Who => ({ serviceKey: a.keys.service_role_key });
    const B = (): Who => ({ serviceKey: b.keys.service_role_key });

    /** A user of `tenant`, staff where `roles` say, and how they call /admin/v1. */
    async function staff(
      tenant: Tenant,
      roles: { of: Tenant | "platform"; role: Role }[],
      keys?: TenantKeys,
      aal: "aal1" | "aal2" = "aal1",
    ): Promise<Who> {
      const user = await seedStaffUser(db(), tenant, roles);
      const token = await userToken(db(), tenant, user, `${app.url}/auth/v1`, aal);
      return { token, anonKey: (keys ?? (tenant.id === a.tenant.id ? a.keys : b.keys)).anon_key };
    }

    const statusOf = async (id: string) =>
      (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;

    /** A complete release submitted through the public API; its review job leaves it in review. */
    async function inReview(api: ReturnType<typeof publicApi>, services = [store.ok]): Promise<string> {
      const release = expectStatus(await api<Any>("POST", "/releases", completeRelease({ services })), 201);
      expectStatus(
        await api("POST", `/releases/${release.id}/tracks`, {
          title: "Night Drive",
          isrc: nextIsrc(),
          duration: 200,
        }),
        201,
      );
      expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
      await poll(
        `release ${release.id} in review`,
        () => statusOf(release.id),
        (s) => s === "in_review",
      );
      await poll(
        "its review job to finish",
        () =>
          rows(
            `select 1 from internal.jobs where kind = 'release.review' and payload ->> 'release_id' = $1
             and status in ('queued', 'running')`,
            [release.id],
          ),
        (open) => open.length === 0,
      );
      return release.id as string;
    }

    test("the OpenAPI document: served without a key, every route with its staff role", async () => {
      assert.equal(doc.openapi, "3.1.0");
      const ops = Object.values(doc.paths as Record<string, Record<string, Any>>).flatMap((p) =>
        Object.values(p),
      );
      assert.ok(ops.length >= 25);
      for (const op of ops)
        assert.ok(["reviewer", "operator", "admin", "platform", "signed_in"].includes(op["x-staff-role"]));
      assert.equal(doc.paths["/me"].get["x-staff-role"], "signed_in");
      assert.equal(doc.paths["/stores/{code}"].patch["x-staff-role"], "platform");
      assert.equal(doc.paths["/settings"].patch["x-staff-role"], "admin");
      assert.equal(doc.paths["/jobs"].get["x-staff-role"], "operator");
      assert.equal(doc.paths["/reviews"].get["x-staff-role"], "reviewer");
      // Derived from each route spec: 413/415 wherever a body is taken, 404 with a path id, 503 and
      // X-Request-Id everywhere, WWW-Authenticate on 401, Retry-After on 503.
      for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Any>>)) {
        for (const [method, op] of Object.entries(item)) {
          const where = `${method.toUpperCase()} ${path}`;
          const statuses = Object.keys(op.responses);
          if (op.requestBody) assert.ok(statuses.includes("413") && statuses.includes("415"), where);
          if (path.includes("{")) assert.ok(statuses.includes("404"), where);
          assert.ok(statuses.includes("503"), where);
          for (const r of Object.values(op.responses) as Any[])
            assert.ok(r.headers?.["X-Request-Id"], `${where}: X-Request-Id`);
          assert.ok(op.responses["401"].headers["WWW-Authenticate"], where);
          assert.ok(op.responses["503"].headers["Retry-After"], where);
        }
      }
      // The audit log is a route spec like the others: its filters, cursor and exports documented.
      const audit = doc.paths["/audit"].get;
      assert.equal(audit["x-staff-role"], "admin");
      assert.deepEqual(
        audit.parameters.filter((p: Any) => p.in === "query").map((p: Any) => p.name),
        ["actor", "object", "object_table", "action", "from", "to", "starting_after", "limit", "format"],
      );
      assert.deepEqual(Object.keys(audit.responses["200"].content), [
        "application/json",
        "text/csv",
        "application/x-ndjson",
      ]);
    });

    test("review queue: pages oldest first with counts; bad paging is 400; another tenant sees none of it", async () => {
      const ids = [await inReview(apiA), await inReview(apiA), await inReview(apiA)];
      const theirs = await inReview(apiB);
      const first = expectStatus(await call(A(), "GET", "/reviews?limit=2", { doc: "/reviews" }), 200);
      const all = expectStatus(await call(A(), "GET", "/reviews", { doc: "/reviews" }), 200);
      const mine = all.data.map((r: Any) => r.id).filter((id: string) => ids.includes(id));
      assert.deepEqual(mine, ids, "oldest first");
      assert.equal(first.data.length, 2);
      assert.equal(first.has_more, all.data.length > 2);
      assert.equal(all.counts.total, all.data.length);
      assert.equal(all.counts.in_review + all.counts.submitted, all.counts.total);
      const next = expectStatus(
        await call(A(), "GET", `/reviews?limit=2&starting_after=${first.data[1].id}`, { doc: "/reviews" }),
        200,
      );
      assert.deepEqual(
        [...first.data, ...next.data].map((r: Any) => r.id),
        all.data.slice(0, first.data.length + next.data.length).map((r: Any) => r.id),
      );
      assert.ok(!all.data.some((r: Any) => r.id === theirs));

      let p = assertProblem(
        await call(A(), "GET", "/reviews?limit=0", { doc: "/reviews" }),
        400,
        "invalid_request",
      );
      assert.equal(p.param, "limit");
      p = assertProblem(await call(A(), "GET", "/reviews?limit=101"), 400, "invalid_request");
      assert.equal(p.param, "limit");
      p = assertProblem(await call(A(), "GET", "/reviews?sort=desc"), 400, "invalid_request");
      assert.equal(p.errors?.[0]?.code, "unknown_field");
      // Another tenant's release is no cursor here.
      p = assertProblem(await call(A(), "GET", `/reviews?starting_after=${theirs}`), 400, "invalid_request");
      assert.equal(p.param, "starting_after");
      assert.ok(
        !expectStatus(await call(B(), "GET", "/reviews"), 200).data.some((r: Any) => ids.includes(r.id)),
      );
    });

    test("review page: every field, tracks, artist, checks, media checks and signed URLs that play the files", async () => {
      const { tenant, keys } = await tenantWithKeys(t(), {
        settings: {
          ...UNLIMITED,
          require_media: true,
          public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 },
        },
      });
      const k = await keyedAccount(db(), { tenant });
      const api = publicApi(app.url, k.key.secret);
      const release = expectStatus(
        await api<Any>("POST", "/releases", completeRelease({ services: [store.ok] })),
        201,
      );
      const track = expectStatus(
        await api<Any>("POST", `/releases/${release.id}/tracks`, {
          title: "Night Drive",
          isrc: nextIsrc(),
          duration: 1,
          track_number: 1,
        }),
        201,
      );
      const cover = await artworkJpeg();
      const audio = wav();
      const ct = await artworkUrl(api, release.id, { filename: "cover.jpg" });
      assert.equal(
        (await fetch(ct.upload_url, { method: "PUT", headers: ct.headers, body: cover })).status,
        200,
      );
      assert.equal((await judged(api, ct.asset_id)).status, "valid");
      const at = await audioUrl(api, release.id, track.id, { filename: "master.wav" });
      assert.equal(
        (await fetch(at.upload_url, { method: "PUT", headers: at.headers, body: audio })).status,
        200,
      );
      assert.equal((await judged(api, at.asset_id)).status, "valid");
      expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
      await poll(
        "in review",
        () => statusOf(release.id),
        (s) => s === "in_review",
      );

      const who: Who = { serviceKey: keys.service_role_key };
      const r = expectStatus(
        await call(who, "GET", `/releases/${release.id}`, { doc: "/releases/{id}" }),
        200,
      );
      assert.equal(r.id, release.id);
      assert.equal(r.status, "in_review");
      assert.equal(r.title, release.title);
      assert.equal(r.account.id, k.account.id);
      assert.equal(r.artist.id, release.artist_id);
      assert.deepEqual(r.services, [store.ok]);
      assert.deepEqual(r.checks, []);
      assert.equal(r.correction, null);
      assert.deepEqual(
        r.media_checks.map((m: Any) => [m.slot, m.track_id, m.status]),
        [
          ["cover", null, "valid"],
          ["audio", track.id, "valid"],
        ],
      );
      assert.equal(r.tracks.length, 1);
      assert.equal(r.tracks[0].isrc, track.isrc);
      assert.equal(r.tracks[0].audio.status, "valid");
      assert.ok(r.history.some((h: Any) => h.to_status === "in_review"));
      // Who moved it, in words: the account's API key submitted it (the public API), by its name.
      const submitted = r.history.find((h: Any) => h.to_status === "submitted");
      assert.match(submitted.actor, /^API key \S/, JSON.stringify(submitted));
      // The signed URLs serve the files themselves, with their types, to anyone holding them (an <img>, an <audio>).
      const expires = Date.parse(r.cover.url_expires_at);
      assert.ok(expires > Date.now() + 10 * 60_000 && expires <= Date.now() + 16 * 60_000);
      const img = await fetch(r.cover.url);
      assert.equal(img.status, 200);
      assert.equal(img.headers.get("content-type"), "image/jpeg");
      assert.deepEqual(Buffer.from(await img.arrayBuffer()), cover);
      const snd = await fetch(r.tracks[0].audio.url);
      assert.equal(snd.status, 200);
      assert.equal(snd.headers.get("content-type"), "audio/wav");
      assert.deepEqual(Buffer.from(await snd.arrayBuffer()), audio);
      // A tampered URL is refused.
      assert.equal((await fetch(`${r.cover.url.slice(0, -3)}abc`)).status, 403);

      // A reviewer of that tenant reads it too; another tenant's key and staff do not.
      const reviewer = await staff(tenant, [{ of: tenant, role: "reviewer" }], keys);
      expectStatus(await call(reviewer, "GET", `/releases/${release.id}`), 200);
      assertProblem(
        await call(A(), "GET", `/releases/${release.id}`, { doc: "/releases/{id}" }),
        404,
        "not_found",
      );
      const otherReviewer = await staff(a.tenant, [{ of: a.tenant, role: "admin" }]);
      assertProblem(await call(otherReviewer, "GET", `/releases/${release.id}`), 404, "not_found");
      assertProblem(
        await call(otherReviewer, "GET", `/releases/${release.id}`, { tenant: tenant.id }),
        403,
        "not_staff",
      );
      assertProblem(await call(who, "GET", "/releases/not-a-uuid"), 404, "not_found");
      assertProblem(await call(who, "GET", `/releases/${randomUUID()}`), 404, "not_found");
      // A missing cover shows as a media check, and the automatic checks say so.
      await rows(
        "update public.media_assets set superseded_at = now() where release_id = $1 and kind = 'artwork'",
        [release.id],
      );
      const again = expectStatus(
        await call(who, "GET", `/releases/${release.id}`, { doc: "/releases/{id}" }),
        200,
      );
      assert.equal(again.cover, null);
      assert.equal(again.media_checks[0].status, "missing");
      assert.ok(again.checks.length > 0);
    });

    test("correction diff: what the store has against the corrected metadata, until the update reaches it", async () => {
      const id = await inReview(apiA);
      expectStatus(
        await call(A(), "POST", `/releases/${id}/approve`, { doc: "/releases/{id}/approve" }),
        200,
      );
      await poll(
        "live",
        () => statusOf(id),
        (s) => s === "live",
      );
      const before = expectStatus(await call(A(), "GET", `/releases/${id}`), 200);
      assert.equal(before.correction, null);
      await worker.stop();
      try {
        expectStatus(
          await apiA("PATCH", `/releases/${id}/metadata`, { title: "Night Drive (Remastered)" }),
          200,
        );
        const r = expectStatus(await call(A(), "GET", `/releases/${id}`, { doc: "/releases/{id}" }), 200);
        assert.equal(r.correction.version, 1);
        assert.equal(r.correction.delivered.store, store.ok);
        assert.equal(r.correction.delivered.action, "insert");
        assert.deepEqual(r.correction.changes, [
          { field: "title", delivered: before.title, current: "Night Drive (Remastered)" },
        ]);
      } finally {
        worker.start();
      }
      await poll(
        "the update delivered",
        async () => expectStatus(await call(A(), "GET", `/releases/${id}`), 200).correction,
        (c: Any) => c.delivered?.action === "update" && c.delivered?.correction_version === 1,
      );
      const r = expectStatus(await call(A(), "GET", `/releases/${id}`), 200);
      assert.deepEqual(r.correction.changes, [], "the store has the correction");
    });

    test("deliveries across the tenant: errors first, filters, pages; a delivery's history and jobs; retry", async () => {
      const id = await inReview(apiA, [store.ok, store.fail]);
      expectStatus(await call(A(), "POST", `/releases/${id}/approve`), 200);
      await poll(
        "the failing store in error",
        async () =>
          (
            await rows<{ status: string }>(
              "select status from internal.release_deliveries where release_id = $1 and store = $2",
              [id, store.fail],
            )
          )[0]?.status,
        (s) => s === "error",
      );
      const all = expectStatus(await call(A(), "GET", "/deliveries", { doc: "/deliveries" }), 200);
      const firstOk = all.data.findIndex((d: Any) => d.status !== "error");
      const lastError = all.data.map((d: Any) => d.status).lastIndexOf("error");
      assert.ok(lastError >= 0 && (firstOk === -1 || lastError < firstOk), "every error before the rest");
      const failing = all.data.find((d: Any) => d.release.id === id && d.store === store.fail);
      assert.equal(failing.status, "error");
      assert.match(failing.message, /Audio is mono/);
      assert.equal(failing.release.account_id, accountA.id);

      const byRelease = expectStatus(
        await call(A(), "GET", `/deliveries?release_id=${id}`, { doc: "/deliveries" }),
        200,
      );
      assert.deepEqual(byRelease.data.map((d: Any) => d.store).sort(), [store.fail, store.ok].sort());
      const byStore = expectStatus(
        await call(A(), "GET", `/deliveries?store=${store.fail}&status=error`),
        200,
      );
      assert.ok(
        byStore.data.length >= 1 &&
          byStore.data.every((d: Any) => d.store === store.fail && d.status === "error"),
      );
      // Pages of one walk the same list.
      const walked: string[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < 50; i++) {
        const page = expectStatus(
          await call(A(), "GET", `/deliveries?limit=1${cursor ? `&starting_after=${cursor}` : ""}`, {
            doc: "/deliveries",
          }),
          200,
        );
        walked.push(...page.data.map((d: Any) => d.id));
        if (!page.has_more) break;
        cursor = page.data[0].id;
      }
      const again = expectStatus(await call(A(), "GET", "/deliveries"), 200);
      assert.deepEqual(
        walked,
        again.data.map((d: Any) => d.id),
      );

      const detail = expectStatus(
        await call(A(), "GET", `/deliveries/${failing.id}`, { doc: "/deliveries/{id}" }),
        200,
      );
      assert.equal(detail.id, failing.id);
      assert.equal(detail.history[0].id, failing.id);
      assert.ok(
        detail.jobs.some((j: Any) => j.kind === "delivery.send" && /Audio is mono/.test(j.last_error ?? "")),
      );
      assertProblem(await call(B(), "GET", `/deliveries/${failing.id}`), 404, "not_found");
      assert.ok(
        !expectStatus(await call(B(), "GET", "/deliveries"), 200).data.some((d: Any) => d.release.id === id),
      );
      assertProblem(await call(A(), "GET", "/deliveries?status=broken"), 400, "invalid_request");
      assertProblem(await call(A(), "GET", "/deliveries?release_id=nope"), 400, "invalid_request");

      // Fixed at the store: retried, it goes live.
      await rows("update internal.stores set settings = $2 where code = $1", [
        store.fail,
        JSON.stringify({ adapter: "sandbox" }),
      ]);
      const retried = expectStatus(
        await call(A(), "POST", `/releases/${id}/deliveries/retry`, {
          doc: "/releases/{id}/deliveries/retry",
        }),
        200,
      );
      assert.equal(retried.retried, 1);
      await poll(
        "live",
        () => statusOf(id),
        (s) => s === "live",
      );
      await rows("update internal.stores set settings = $2 where code = $1", [
        store.fail,
        JSON.stringify({ adapter: "sandbox", sandbox: { fail: "Audio is mono" } }),
      ]);
    });

    test("takedowns: the tenant's requests with each store's state", async () => {
      const id = await inReview(apiA);
      expectStatus(await call(A(), "POST", `/releases/${id}/approve`), 200);
      await poll(
        "live",
        () => statusOf(id),
        (s) => s === "live",
      );
      expectStatus(await apiA("POST", `/releases/${id}/takedown`, { reason: "Rights dispute" }), 202);
      await poll(
        "taken down",
        () => statusOf(id),
        (s) => s === "taken_down",
      );
      const list = expectStatus(await call(A(), "GET", "/takedowns", { doc: "/takedowns" }), 200);
      const mine = list.data.find((x: Any) => x.release.id === id);
      assert.equal(mine.status, "completed");
      assert.equal(mine.reason, "Rights dispute");
      assert.deepEqual(
        mine.stores.map((s: Any) => [s.store, s.status, s.confirmed_by]),
        [[store.ok, "taken_down", "sandbox"]],
      );
      const done = expectStatus(await call(A(), "GET", "/takedowns?status=completed&limit=1"), 200);
      assert.equal(done.data.length, 1);
      assert.ok(
        !expectStatus(await call(B(), "GET", "/takedowns"), 200).data.some((x: Any) => x.release.id === id),
      );
    });

    test("jobs: the tenant's dead jobs with their last error, retried once; nothing of another tenant's", async () => {
      const id = await inReview(apiA);
      // A dead job of the tenant's release (the database names its tenant when it is written).
      const [job] = await rows<{ id: string; tenant_id: string }>(
        `insert into internal.jobs (kind, payload, status, attempts, max_attempts, last_error, finished_at)
         values ('release.deliver', $1, 'dead', 10, 10, 'Error: the store timed out', now()) returning id::text, tenant_id`,
        [JSON.stringify({ release_id: id })],
      );
      assert.equal(job?.tenant_id, a.tenant.id);
      const dead = expectStatus(await call(A(), "GET", "/jobs", { doc: "/jobs" }), 200);
      const mine = dead.data.find((j: Any) => j.id === job?.id);
      assert.equal(mine.last_error, "Error: the store timed out");
      assert.equal(mine.status, "dead");
      assert.ok(dead.data.every((j: Any) => j.status === "dead"));
      assert.ok(!expectStatus(await call(B(), "GET", "/jobs"), 200).data.some((j: Any) => j.id === job?.id));
      assertProblem(await call(B(), "POST", `/jobs/${job?.id}/retry`), 404, "not_found");
      assertProblem(await call(A(), "POST", "/jobs/abc/retry"), 404, "not_found");
      assertProblem(await call(A(), "GET", "/jobs?state=lost"), 400, "invalid_request");
      const retried = expectStatus(
        await call(A(), "POST", `/jobs/${job?.id}/retry`, { doc: "/jobs/{id}/retry" }),
        200,
      );
      assert.equal(retried.status, "queued");
      assert.equal(retried.attempts, 0);
      await poll(
        "the retried job to run",
        async () =>
          (await rows<{ status: string }>("select status from internal.jobs where id = $1", [job?.id]))[0]
            ?.status,
        (s) => s === "succeeded",
      );
      assertProblem(
        await call(A(), "POST", `/jobs/${job?.id}/retry`, { doc: "/jobs/{id}/retry" }),
        409,
        "invalid_state",
      );
      const succeeded = expectStatus(
        await call(A(), "GET", "/jobs?state=succeeded&kind=release.deliver"),
        200,
      );
      assert.ok(succeeded.data.some((j: Any) => j.id === job?.id));
    });

    test("royalty import: its progress polled while the report is still arriving, then its report", async () => {
      const importId = randomUUID();
      const sample = fs.readFileSync("docs/formats/backline.csv");
      const half = Math.floor(sample.length / 2);
      let release: () => void = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new Uint8Array(sample.subarray(0, half)));
          await gate;
          controller.enqueue(new Uint8Array(sample.subarray(half)));
          controller.close();
        },
      });
      const upload = fetch(
        `${app.url}/admin/v1/royalty-imports?format=backline&id=${importId}&file_name=backline.csv`,
        {
          method: "POST",
          headers: { apikey: a.keys.service_role_key, "content-type": "text/csv" },
          body,
          duplex: "half",
        } as RequestInit,
      );
      const running = await poll(
        "the import to show its first bytes",
        async () => call(A(), "GET", `/royalty-imports/${importId}`),
        (r) => r.status === 200 && (r.body as Any).progress?.bytes_received >= half,
      );
      conforms("GET", "/royalty-imports/{id}", running);
      assert.equal(running.body.status, "running");
      assert.equal(running.body.progress.phase, "receiving");
      const listed = expectStatus(
        await call(A(), "GET", "/royalty-imports", { doc: "/royalty-imports" }),
        200,
      );
      assert.equal(listed.data[0].id, importId, "a running import leads the list");
      assertProblem(await call(B(), "GET", `/royalty-imports/${importId}`), 404, "not_found");
      release();
      const res = await upload;
      const result = (await res.json()) as Any;
      assert.equal(res.status, 201, JSON.stringify(result));
      conforms("POST", "/royalty-imports", { status: res.status, headers: res.headers, body: result });
      assert.equal(result.import.id, importId);
      const done = expectStatus(
        await call(A(), "GET", `/royalty-imports/${importId}`, { doc: "/royalty-imports/{id}" }),
        200,
      );
      assert.equal(done.status, "completed");
      assert.equal(done.lines_total, result.import.lines_total);
      const run = await rows<Any>(
        "select phase, outcome, import_id, bytes_received from internal.royalty_import_runs where id = $1",
        [importId],
      );
      assert.deepEqual(run[0], {
        phase: "done",
        outcome: "completed",
        import_id: importId,
        bytes_received: String(sample.length),
      });
      // The id is taken now.
      const again = await fetch(`${app.url}/admin/v1/royalty-imports?format=backline&id=${importId}`, {
        method: "POST",
        headers: { apikey: a.keys.service_role_key, "content-type": "text/csv" },
        body: "x",
      });
      assert.equal(again.status, 409);
      assert.equal(((await again.json()) as Any).code, "id_in_use");
      // Nobody but the service role reads the progress table.
      for (const claims of [tenantServiceClaims(a.tenant), userClaims(await seedUser(db(), a.tenant))]) {
        await assert.rejects(
          db().withRequestContext(claims as never, (tx) =>
            tx.query("select * from internal.royalty_import_runs"),
          ),
          (e: unknown) => asDbError(e)?.sqlstate === "42501",
        );
      }
    });

    test("accounts: pages, members and open invitations, API keys without secrets; admin only", async () => {
      const second = await seedAccount(db(), a.tenant, "Second Label");
      const owner = await seedUser(db(), a.tenant, [{ account: second, role: "owner" }]);
      await rows(
        "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'member')",
        [a.tenant.id, second.id, "new.member@example.org"],
      );
      const key = await keyedAccount(db(), { tenant: a.tenant });
      const list = expectStatus(await call(A(), "GET", "/accounts?limit=1", { doc: "/accounts" }), 200);
      assert.equal(list.data.length, 1);
      assert.equal(list.has_more, true);
      const rest = expectStatus(await call(A(), "GET", `/accounts?starting_after=${list.data[0].id}`), 200);
      const ids = [...list.data, ...rest.data].map((x: Any) => x.id);
      assert.ok(ids.includes(second.id) && ids.includes(accountA.id));
      assert.ok(
        !ids.includes(key.account.id) || ids.indexOf(key.account.id) < ids.indexOf(accountA.id),
        "newest first",
      );

      const detail = expectStatus(
        await call(A(), "GET", `/accounts/${second.id}`, { doc: "/accounts/{id}" }),
        200,
      );
      assert.deepEqual(
        detail.members.map((m: Any) => [m.user_id, m.role]),
        [[owner.id, "owner"]],
      );
      assert.deepEqual(
        detail.invitations.map((i: Any) => [i.email, i.role]),
        [["new.member@example.org", "member"]],
      );
      const keys = expectStatus(
        await call(A(), "GET", `/accounts/${key.account.id}/api-keys`, { doc: "/accounts/{id}/api-keys" }),
        200,
      );
      assert.equal(keys.data.length, 1);
      assert.ok(key.key.secret.startsWith(keys.data[0].prefix));
      const text = JSON.stringify(keys);
      assert.ok(!text.includes(key.key.secret) && !text.includes("key_hash"), "never a secret");
      assertProblem(await call(B(), "GET", `/accounts/${second.id}`), 404, "not_found");
      assertProblem(await call(B(), "GET", `/accounts/${second.id}/api-keys`), 404, "not_found");
      const operator = await staff(a.tenant, [{ of: a.tenant, role: "operator" }]);
      const p = assertProblem(
        await call(operator, "GET", "/accounts", { doc: "/accounts" }),
        403,
        "insufficient_role",
      );
      assert.match(p.detail, /admin/);
    });

    test("stores: read-only for a tenant; platform admins change them, credentials sealed and never answered", async () => {
      const tenantView = expectStatus(await call(A(), "GET", "/stores", { doc: "/stores" }), 200);
      const conf = tenantView.data.find((s: Any) => s.code === store.conf);
      assert.deepEqual(Object.keys(conf).sort(), [
        "adapter",
        "code",
        "enabled",
        "kind",
        "name",
        "offers_oac",
        "sort",
        "updated_at",
      ]);
      assertProblem(
        await call(A(), "PATCH", `/stores/${store.conf}`, {
          body: { enabled: false },
          doc: "/stores/{code}",
        }),
        403,
        "insufficient_role",
      );
      const tenantAdmin = await staff(a.tenant, [{ of: a.tenant, role: "admin" }]);
      assertProblem(
        await call(tenantAdmin, "PATCH", `/stores/${store.conf}`, { body: { enabled: false } }),
        403,
        "insufficient_role",
      );

      // Store credentials are a sensitive act: a person changes them only from an aal2 session
      // (migration 0020), platform admin or not.
      const platformAal1 = await staff(a.tenant, [{ of: "platform", role: "admin" }]);
      assertProblem(
        await call(platformAal1, "PATCH", `/stores/${store.conf}`, { body: { enabled: false } }),
        403,
        "aal2_required",
      );
      const platform = await staff(a.tenant, [{ of: "platform", role: "admin" }], undefined, "aal2");
      const secret = `s3cr3t-${tag}`;
      const changed = expectStatus(
        await call(platform, "PATCH", `/stores/${store.conf}`, {
          body: {
            name: "Configured Store",
            settings: {
              adapter: "ddex",
              ddex: { destination: { bucket: "drops", secret_access_key: secret } },
            },
          },
          doc: "/stores/{code}",
        }),
        200,
      );
      assert.equal(changed.name, "Configured Store");
      assert.equal(changed.adapter, "ddex");
      assert.deepEqual(changed.credentials, ["ddex.destination.secret_access_key"]);
      assert.ok(!JSON.stringify(changed).includes(secret));
      const [row] = await rows<Any>(
        "select settings, credentials_sealed from internal.stores where code = $1",
        [store.conf],
      );
      assert.ok(
        !JSON.stringify(row.settings).includes(secret) && !row.credentials_sealed.includes(secret),
        "sealed at rest",
      );
      assert.equal(
        JSON.parse(db().secrets.decrypt(row.credentials_sealed)).ddex.destination.secret_access_key,
        secret,
      );
      // A secret left out keeps its value; null removes it.
      const kept = expectStatus(
        await call(platform, "PATCH", `/stores/${store.conf}`, {
          body: { settings: { adapter: "ddex", ddex: { destination: { bucket: "other" } } } },
        }),
        200,
      );
      assert.deepEqual(kept.credentials, ["ddex.destination.secret_access_key"]);
      assert.equal((kept.settings as Any).ddex.destination.bucket, "other");
      const removed = expectStatus(
        await call(platform, "PATCH", `/stores/${store.conf}`, {
          body: { settings: { adapter: "sandbox", ddex: { destination: { secret_access_key: null } } } },
        }),
        200,
      );
      assert.deepEqual(removed.credentials, []);
      const shown = expectStatus(
        await call(platform, "GET", `/stores/${store.conf}`, { doc: "/stores/{code}" }),
        200,
      );
      assert.deepEqual(shown.credentials, []);
      assertProblem(
        await call(platform, "PATCH", `/stores/${store.conf}`, {
          body: { settings: { adapter: "ftp" } },
          doc: "/stores/{code}",
        }),
        422,
        "invalid_settings",
      );
      const bad = assertProblem(
        await call(platform, "PATCH", `/stores/${store.conf}`, {
          body: { enabled: "yes", colour: 1 },
          doc: "/stores/{code}",
        }),
        400,
        "invalid_request",
      );
      assert.deepEqual(bad.errors?.map((e) => e.param).sort(), ["colour", "enabled"]);
      assertProblem(await call(platform, "GET", "/stores/no_such_store"), 404, "not_found");
      assertProblem(await call(platform, "GET", "/stores/Not-A-Code"), 404, "not_found");
    });

    test("a store's connection check (what stores configure --check runs): platform admins only, says what happened", async () => {
      const code = `dsk_chk_${tag}`;
      const dir = fs.mkdtempSync(`${os.tmpdir()}/backline-store-check-`);
      const ddex = (path: string) => ({
        adapter: "ddex",
        ddex: {
          sender: { dpid: "PADPIDA2026112201B", name: "Backline Distribution" },
          recipient: { dpid: "PADPIDA2011072101T", name: "Example Store" },
          destination: { type: "directory", path },
        },
      });
      await rows("insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)", [
        code,
        "Checked Store",
        JSON.stringify(ddex(dir)),
      ]);
      const before = await rows("select settings, updated_at from internal.stores where code = $1", [code]);
      try {
        const path = `/stores/${code}/check`;
        const doc = "/stores/{code}/check";
        // A tenant's admin or its service-role key: stores are the installation's.
        assertProblem(await call(A(), "POST", path, { doc }), 403, "insufficient_role");
        const tenantAdmin = await staff(a.tenant, [{ of: a.tenant, role: "admin" }]);
        assertProblem(await call(tenantAdmin, "POST", path, { doc }), 403, "insufficient_role");
        // Platform staff act on the installation's stores from an aal2 session only.
        const platformAal1 = await staff(a.tenant, [{ of: "platform", role: "admin" }]);
        assertProblem(await call(platformAal1, "POST", path, { doc }), 403, "aal2_required");
        const platform = await staff(a.tenant, [{ of: "platform", role: "admin" }], undefined, "aal2");
        const ok = expectStatus(await call(platform, "POST", path, { body: {}, doc }), 200);
        assert.deepEqual(ok, { ok: true, message: `the directory ${dir} is there and writable` });
        // The destination gone: 200 with ok false and the reason, as the CLI prints it.
        fs.rmSync(dir, { recursive: true, force: true });
        const failed = expectStatus(await call(platform, "POST", path, { doc }), 200);
        assert.equal(failed.ok, false);
        assert.match(failed.message, /ENOENT|no such file/i);
        // A store delivering through the sandbox has nothing to connect to.
        const sandbox = expectStatus(await call(platform, "POST", `/stores/${store.ok}/check`, { doc }), 200);
        assert.equal(sandbox.ok, true);
        assert.match(sandbox.message, /sandbox: nothing to connect to/);
        assertProblem(await call(platform, "POST", "/stores/no_such_store/check", { doc }), 404, "not_found");
        assertProblem(
          await call(platform, "POST", path, { body: { now: true }, doc }),
          400,
          "invalid_request",
        );
        // A check changes nothing.
        assert.deepEqual(
          await rows("select settings, updated_at from internal.stores where code = $1", [code]),
          before,
        );
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
        await rows("delete from internal.stores where code = $1", [code]);
      }
    });

    test("accounts created and API keys issued by the tenant's admins; the secret once, and it works", async () => {
      const operator = await staff(a.tenant, [{ of: a.tenant, role: "operator" }]);
      assertProblem(
        await call(operator, "POST", "/accounts", { body: { name: "Nope" }, doc: "/accounts" }),
        403,
        "insufficient_role",
      );
      const bad = assertProblem(
        await call(A(), "POST", "/accounts", { body: { name: " ", kind: "band", x: 1 }, doc: "/accounts" }),
        400,
        "invalid_request",
      );
      assert.deepEqual(bad.errors?.map((e) => e.param).sort(), ["kind", "name", "x"]);
      const admin = await staff(a.tenant, [{ of: a.tenant, role: "admin" }]);
      const made = expectStatus(
        await call(admin, "POST", "/accounts", {
          body: { name: "  Made Here  ", kind: "artist" },
          doc: "/accounts",
        }),
        201,
      );
      assert.equal(made.name, "Made Here");
      assert.equal(made.kind, "artist");
      assert.deepEqual(made.members, []);
      expectStatus(await call(A(), "GET", `/accounts/${made.id}`, { doc: "/accounts/{id}" }), 200);
      // Another tenant's admin cannot see it, nor issue a key for it.
      assertProblem(await call(B(), "GET", `/accounts/${made.id}`), 404, "not_found");
      assertProblem(
        await call(B(), "POST", `/accounts/${made.id}/api-keys`, { body: { name: "x" } }),
        404,
        "not_found",
      );

      const keysPath = `/accounts/${made.id}/api-keys`;
      const doc = "/accounts/{id}/api-keys";
      assertProblem(
        await call(operator, "POST", keysPath, { body: { name: "ci" }, doc }),
        403,
        "insufficient_role",
      );
      assertProblem(
        await call(admin, "POST", keysPath, { body: { name: "ci", mode: "prod" }, doc }),
        400,
        "invalid_request",
      );
      const issued = expectStatus(await call(admin, "POST", keysPath, { body: { name: "ci" }, doc }), 201);
      assert.equal(issued.account_id, made.id);
      assert.equal(issued.key.status, "active");
      assert.equal(issued.key.mode, "live");
      assert.ok(issued.secret.startsWith(issued.key.prefix), "the prefix is the secret's start");
      // The secret works on the public API at once, as the new account.
      const asNew = publicApi(app.url, issued.secret);
      expectStatus(await asNew("GET", "/releases"), 200);
      // Listed afterwards without the secret.
      const listed = expectStatus(await call(admin, "GET", keysPath, { doc }), 200);
      assert.deepEqual(
        listed.data.map((k: Any) => k.id),
        [issued.key.id],
      );
      assert.ok(!JSON.stringify(listed).includes(issued.secret));
      // A test key belongs to the account's sandbox twin.
      const test = expectStatus(
        await call(admin, "POST", keysPath, { body: { name: "tests", mode: "test" }, doc }),
        201,
      );
      assert.notEqual(test.account_id, made.id);
      assert.equal(test.key.mode, "test");
      // Members: a proven user of the tenant is added at once; another address is invited.
      const membersPath = `/accounts/${made.id}/members`;
      const mdoc = "/accounts/{id}/members";
      assertProblem(
        await call(operator, "POST", membersPath, { body: { email: "x@example.com" }, doc: mdoc }),
        403,
        "insufficient_role",
      );
      const badMember = assertProblem(
        await call(admin, "POST", membersPath, {
          body: { email: "not an address", role: "boss" },
          doc: mdoc,
        }),
        400,
        "invalid_request",
      );
      assert.deepEqual(badMember.errors?.map((e) => e.param).sort(), ["email", "role"]);
      const known = await seedUser(db(), a.tenant);
      const added = expectStatus(
        await call(admin, "POST", membersPath, { body: { email: known.email, role: "admin" }, doc: mdoc }),
        200,
      );
      assert.equal(added.status, "added");
      assert.equal(added.user_id, known.id);
      const invited = expectStatus(
        await call(admin, "POST", membersPath, { body: { email: `new-${tag}@example.com` }, doc: mdoc }),
        200,
      );
      assert.equal(invited.status, "invited");
      assert.equal(invited.role, "member");
      const detail = expectStatus(await call(admin, "GET", `/accounts/${made.id}`), 200);
      assert.deepEqual(
        detail.members.map((m: Any) => [m.user_id, m.role]),
        [[known.id, "admin"]],
      );
      assert.deepEqual(
        detail.invitations.map((i: Any) => i.email),
        [`new-${tag}@example.com`],
      );
      assertProblem(
        await call(B(), "POST", membersPath, { body: { email: "x@example.com" } }),
        404,
        "not_found",
      );

      // The key's issuing is in the audit log as the admin's (an account's creation is not:
      // migration 0020 records accounts' changes and removals, not their creation).
      const audit = await rows<{ actor_type: string }>(
        "select actor_type from internal.audit_log where action = 'insert' and object_table = 'internal.api_keys' and object_id = $1",
        [issued.key.id],
      );
      assert.deepEqual(
        audit.map((r) => r.actor_type),
        ["user"],
      );
    });

    test("settings: lead days, auto-review and branding, validated field by field; admin only", async () => {
      const { tenant, keys } = await tenantWithKeys(t());
      const who: Who = { serviceKey: keys.service_role_key };
      const initial = expectStatus(await call(who, "GET", "/settings", { doc: "/settings" }), 200);
      // A new tenant's display name is its name.
      assert.deepEqual(
        { ...initial, updated_at: null },
        {
          tenant_id: tenant.id,
          release_lead_days: 7,
          auto_review: false,
          require_media: false,
          branding: {
            display_name: tenant.name,
            logo_url: null,
            primary_color: null,
            support_email: null,
            custom_css: null,
          },
          updated_at: null,
        },
      );
      const changed = expectStatus(
        await call(who, "PATCH", "/settings", {
          body: {
            release_lead_days: 14,
            auto_review: true,
            branding: {
              display_name: "Night Owl Distribution",
              logo_url: "https://cdn.example.org/logo.png",
              primary_color: "#1a2B3c",
              support_email: "help@example.org",
            },
          },
          doc: "/settings",
        }),
        200,
      );
      assert.equal(changed.release_lead_days, 14);
      assert.equal(changed.auto_review, true);
      assert.equal(changed.branding.primary_color, "#1a2B3c");
      const [row] = await rows<Any>(
        `select (t.settings ->> 'auto_review')::boolean as auto_review, o.release_lead_days, o.display_name
         from internal.tenants t join internal.organization_settings o on o.tenant_id = t.id where t.id = $1`,
        [tenant.id],
      );
      assert.deepEqual(row, {
        auto_review: true,
        release_lead_days: 14,
        display_name: "Night Owl Distribution",
      });
      // Left out: unchanged; null: cleared.
      const cleared = expectStatus(
        await call(who, "PATCH", "/settings", { body: { branding: { logo_url: null } } }),
        200,
      );
      assert.equal(cleared.branding.logo_url, null);
      assert.equal(cleared.branding.display_name, "Night Owl Distribution");
      assert.equal(cleared.release_lead_days, 14);

      const bad = assertProblem(
        await call(who, "PATCH", "/settings", {
          body: {
            release_lead_days: 400,
            auto_review: "yes",
            branding: {
              primary_color: "red",
              logo_url: "javascript:alert(1)",
              support_email: "nope",
              motto: "x",
            },
          },
          doc: "/settings",
        }),
        400,
        "invalid_request",
      );
      assert.deepEqual(bad.errors?.map((e) => e.param).sort(), [
        "auto_review",
        "branding.logo_url",
        "branding.motto",
        "branding.primary_color",
        "branding.support_email",
        "release_lead_days",
      ]);
      assertProblem(await call(who, "PATCH", "/settings", { body: [] }), 400, "invalid_request");
      assert.equal(
        expectStatus(await call(who, "GET", "/settings"), 200).release_lead_days,
        14,
        "nothing changed",
      );
      const operator = await staff(tenant, [{ of: tenant, role: "operator" }], keys);
      assertProblem(await call(operator, "GET", "/settings"), 403, "insufficient_role");
      assertProblem(await call(B(), "GET", "/settings", { tenant: tenant.id }), 403, "not_staff");
    });

    test("roles: a reviewer reviews but reaches no operator or admin route; another tenant's staff gets nothing", async () => {
      const reviewer = await staff(a.tenant, [{ of: a.tenant, role: "reviewer" }]);
      const me = expectStatus(await call(reviewer, "GET", "/me", { doc: "/me" }), 200);
      assert.deepEqual(
        me.staff.map((x: Any) => [x.tenant_id, x.role]),
        [[a.tenant.id, "reviewer"]],
      );
      expectStatus(await call(reviewer, "GET", "/reviews", { doc: "/reviews" }), 200);
      expectStatus(await call(reviewer, "GET", "/review-reasons", { doc: "/review-reasons" }), 200);
      expectStatus(await call(reviewer, "GET", "/oac-requests", { doc: "/oac-requests" }), 200);
      for (const [method, path] of [
        ["GET", "/deliveries"],
        ["GET", `/deliveries/${randomUUID()}`],
        ["GET", "/takedowns"],
        ["GET", "/jobs"],
        ["POST", "/jobs/1/retry"],
        ["GET", "/royalty-imports"],
        ["GET", "/accounts"],
        ["GET", "/stores"],
        ["GET", "/settings"],
        ["PATCH", "/settings"],
      ] as const) {
        assertProblem(
          await call(reviewer, method, path, method === "PATCH" ? { body: {} } : {}),
          403,
          "insufficient_role",
        );
      }
      const operator = await staff(a.tenant, [{ of: a.tenant, role: "operator" }]);
      expectStatus(await call(operator, "GET", "/deliveries"), 200);
      expectStatus(await call(operator, "GET", "/jobs"), 200);
      expectStatus(await call(operator, "GET", "/stores"), 200);
      const stranger = await staff(b.tenant, [{ of: b.tenant, role: "admin" }]);
      for (const path of ["/reviews", "/deliveries", "/jobs", "/accounts", "/settings"]) {
        assertProblem(await call(stranger, "GET", path, { tenant: a.tenant.id }), 403, "not_staff");
      }
      assertProblem(
        await call({ serviceKey: a.keys.anon_key }, "GET", "/reviews"),
        403,
        "service_role_required",
      );
      const res = await fetch(`${app.url}/admin/v1/deliveries`);
      assert.equal(res.status, 401);
    });
  });
});
