import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { requestHash } from "../src/public-api/idempotency.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  type ApiResponse,
  completeRelease,
  type IssuedKey,
  issueTestKey,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import { seedAccount } from "./support/seed.ts";

/**
 * What every endpoint of /api/public/v1 shares, over real HTTP: Idempotency-Key on POST, the
 * per-key rate limit and its headers, and the error responses that come before any handler
 * (malformed JSON, media type, size, body shape, unknown routes) or after a server failure.
 * Every error is problem+json with the request's id and no internals.
 */

type Api = ReturnType<typeof publicApi>;

const PREFIX = "/api/public/v1";
const RELEASES_PATH = `${PREFIX}/releases`;

/** Stack frames, file paths, SQL and driver words: none of it may reach a client. */
const INTERNALS =
  /\bat [\w.<>]+ \(|node_modules|node:internal|\.ts:\d+|\/src\/|\bstack\b|\bselect\b|\binsert into\b|\bSQLSTATE\b|\bpg_|\binternal\.\w+|\brelation\b/i;

/** The invariants of every error response; `replayed` responses keep the first request's id. */
function assertProblem(r: ApiResponse, status: number, code: string, options: { replayed?: boolean } = {}) {
  const text = JSON.stringify(r.body);
  assert.equal(r.status, status, `${status} ${code} expected: ${r.status} ${text}`);
  assert.match(r.headers.get("content-type") ?? "", /^application\/problem\+json/, text);
  const body = r.body as Record<string, unknown>;
  assert.equal(body.code, code, text);
  assert.equal(body.status, status, text);
  assert.equal(body.type, `https://backline.dev/errors/${code}`);
  assert.equal(typeof body.title, "string");
  assert.equal(typeof body.detail, "string");
  const requestId = r.headers.get("x-request-id");
  assert.ok(requestId, "every response has X-Request-Id");
  if (!options.replayed) assert.equal(body.request_id, requestId, "request_id is the X-Request-Id");
  assert.doesNotMatch(text, INTERNALS, "no internals in an error");
}

async function raw(
  url: string,
  method: string,
  path: string,
  init: { token?: string; contentType?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<ApiResponse> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.contentType ? { "content-type": init.contentType } : {}),
      ...init.headers,
    },
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: the assertion shows the text
  }
  return { status: res.status, headers: res.headers, body: body as Record<string, unknown> };
}

describeEachEngine("public API over HTTP: idempotency, rate limits, errors", (t) => {
  let app: RunningApp;
  let tenant: Tenant;

  before(async () => {
    app = await startApp(t());
    tenant = (
      await tenantWithKeys(t(), { settings: { public_api_rate_limit: { max: 100_000, windowSeconds: 60 } } })
    ).tenant;
  });

  after(async () => {
    await app?.close();
  });

  /** A fresh account of the roomy tenant, its key and a client. */
  async function account(scopes?: string[]): Promise<{ account: Account; key: IssuedKey; api: Api }> {
    const { account, key } = await keyedAccount(t().db, { tenant, ...(scopes ? { scopes } : {}) });
    return { account, key, api: publicApi(app.url, key.secret) };
  }

  async function releaseCount(api: Api): Promise<number> {
    const r = await api<{ total: number }>("GET", "/releases");
    assert.equal(r.status, 200);
    return r.body.total;
  }

  describe("Idempotency-Key", () => {
    test("a retry with the same key and body replays the first response; the release is made once", async () => {
      const { api } = await account();
      const body = completeRelease({ title: "Once Only" });
      const first = await api("POST", "/releases", body, { "idempotency-key": "create-once-1" });
      assert.equal(first.status, 201, JSON.stringify(first.body));
      assert.equal(first.headers.get("idempotent-replayed"), null);

      const retry = await api("POST", "/releases", body, { "idempotency-key": "create-once-1" });
      assert.equal(retry.status, 201);
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(retry.body, first.body);
      assert.match(retry.headers.get("content-type") ?? "", /^application\/json/);

      assert.equal(await releaseCount(api), 1, "only one release exists");
    });

    test("the same key with a different body is 422 idempotency_key_reused, and changes nothing", async () => {
      const { api } = await account();
      const first = await api("POST", "/releases", completeRelease({ title: "A" }), {
        "idempotency-key": "reused-key",
      });
      assert.equal(first.status, 201);
      const other = await api("POST", "/releases", completeRelease({ title: "B" }), {
        "idempotency-key": "reused-key",
      });
      assertProblem(other, 422, "idempotency_key_reused");
      assert.equal((other.body as { param?: string }).param, "Idempotency-Key");
      assert.equal(await releaseCount(api), 1);
    });

    test("a key over 255 characters, or with invisible characters, is 400 invalid_idempotency_key", async () => {
      const { api } = await account();
      const long = await api("POST", "/releases", completeRelease(), { "idempotency-key": "k".repeat(256) });
      assertProblem(long, 400, "invalid_idempotency_key");
      const spaced = await api("POST", "/releases", completeRelease(), { "idempotency-key": "two words" });
      assertProblem(spaced, 400, "invalid_idempotency_key");
      assert.equal(await releaseCount(api), 0);
      const longest = await api("POST", "/releases", completeRelease(), {
        "idempotency-key": "k".repeat(255),
      });
      assert.equal(longest.status, 201, "255 characters are fine");
    });

    test("keys are per account: another account's same key runs anew", async () => {
      const a = await account();
      const b = await account();
      const body = completeRelease({ title: "Shared Key" });
      const first = await a.api("POST", "/releases", body, { "idempotency-key": "shared-key" });
      const second = await b.api("POST", "/releases", body, { "idempotency-key": "shared-key" });
      assert.equal(first.status, 201);
      assert.equal(second.status, 201);
      assert.equal(second.headers.get("idempotent-replayed"), null);
      assert.notEqual((second.body as { id: string }).id, (first.body as { id: string }).id);
      assert.equal((second.body as { account_id: string }).account_id, b.account.id);
      assert.equal(await releaseCount(b.api), 1);
    });

    test("a 4xx answer of the handler is replayed too", async () => {
      const { api } = await account();
      // Valid JSON and schema, refused by the handler: the artist is not in this account.
      const body = completeRelease({ artist_id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21" });
      const first = await api("POST", "/releases", body, { "idempotency-key": "replayed-4xx" });
      assertProblem(first, 422, "validation_failed");
      const retry = await api("POST", "/releases", body, { "idempotency-key": "replayed-4xx" });
      assertProblem(retry, 422, "validation_failed", { replayed: true });
      assert.equal(retry.headers.get("idempotent-replayed"), "true");
      assert.deepEqual(retry.body, first.body, "the very same problem, with the first request's id");
      assert.equal((retry.body as { request_id: string }).request_id, first.headers.get("x-request-id"));
    });

    test("while the first request still runs, a retry is 409 idempotency_request_in_progress", async () => {
      const { account: acct, api } = await account();
      const body = completeRelease({ title: "Still Running" });
      // The record a request in flight leaves: claimed, locked for a while, no response yet.
      const record = [
        `account:${acct.id}`,
        "POST",
        RELEASES_PATH,
        "in-flight",
        requestHash("POST", RELEASES_PATH, body),
      ];
      await t().db.asService((tx) =>
        tx.query(
          `insert into internal.idempotency_keys (owner, method, path, key, request_hash, status, locked_until)
           values ($1, $2, $3, $4, $5, 'running', now() + interval '5 minutes')`,
          record,
        ),
      );
      const busy = await api("POST", "/releases", body, { "idempotency-key": "in-flight" });
      assertProblem(busy, 409, "idempotency_request_in_progress");
      assert.equal(busy.headers.get("retry-after"), "1");
      assert.equal(await releaseCount(api), 0);

      // Another body under that key is still a reuse, not a wait.
      const reused = await api("POST", "/releases", completeRelease({ title: "Other" }), {
        "idempotency-key": "in-flight",
      });
      assertProblem(reused, 422, "idempotency_key_reused");

      // A request whose process died frees its key once the lock runs out: the retry runs.
      await t().db.asService((tx) =>
        tx.query(
          `update internal.idempotency_keys set locked_until = now() - interval '1 second'
           where owner = $1 and method = $2 and path = $3 and key = $4`,
          record.slice(0, 4),
        ),
      );
      const resumed = await api("POST", "/releases", body, { "idempotency-key": "in-flight" });
      assert.equal(resumed.status, 201, JSON.stringify(resumed.body));
      assert.equal(resumed.headers.get("idempotent-replayed"), null);
      const replay = await api("POST", "/releases", body, { "idempotency-key": "in-flight" });
      assert.equal(replay.headers.get("idempotent-replayed"), "true");
      assert.equal(await releaseCount(api), 1);
    });

    test("a request whose work committed but whose answer was lost never runs again: 409 idempotency_response_lost", async () => {
      const { account: acct, api } = await account();
      const body = completeRelease({ title: "Committed Then Lost" });
      const ids = [`account:${acct.id}`, "POST", RELEASES_PATH, "lost-answer"];
      const first = await api("POST", "/releases", body, { "idempotency-key": "lost-answer" });
      assert.equal(first.status, 201, JSON.stringify(first.body));
      // The key was marked applied in the release's own transaction (the commit of the work).
      const kept = await t().db.asService((tx) =>
        tx.query<{ applied: boolean }>(
          `select applied_at is not null as applied from internal.idempotency_keys
           where owner = $1 and method = $2 and path = $3 and key = $4`,
          ids,
        ),
      );
      assert.equal(kept.rows[0]?.applied, true);
      // What a process killed between its commit and keeping the answer leaves: still running,
      // its lock run out, no answer.
      await t().db.asService((tx) =>
        tx.query(
          `update internal.idempotency_keys
           set status = 'running', response_status = null, response_body = null, response_headers = null,
               locked_until = now() - interval '1 second'
           where owner = $1 and method = $2 and path = $3 and key = $4`,
          ids,
        ),
      );
      const retry = await api("POST", "/releases", body, { "idempotency-key": "lost-answer" });
      assertProblem(retry, 409, "idempotency_response_lost");
      assert.equal((retry.body as { param?: string }).param, "Idempotency-Key");
      assert.equal(await releaseCount(api), 1, "the release was not made a second time");

      // Nobody marks another account's key through the function: it touches only the caller's own.
      const other = await account();
      await t().db.asService((tx) =>
        tx.query(
          `insert into internal.idempotency_keys (owner, method, path, key, request_hash, locked_until)
           values ($1, 'POST', $2, 'foreign', 'h', now() + interval '1 minute')`,
          [`account:${acct.id}`, RELEASES_PATH],
        ),
      );
      await t().db.withRequestContext(
        { role: "authenticated", tenant_id: tenant.id, account_id: other.account.id },
        (tx) =>
          tx.query("select internal.idempotency_applied($1, 'POST', $2, 'foreign')", [
            `account:${acct.id}`,
            RELEASES_PATH,
          ]),
      );
      const foreign = await t().db.asService((tx) =>
        tx.query<{ applied: boolean }>(
          `select applied_at is not null as applied from internal.idempotency_keys where owner = $1 and key = 'foreign'`,
          [`account:${acct.id}`],
        ),
      );
      assert.equal(foreign.rows[0]?.applied, false, "another account cannot mark this account's key");
    });

    test("concurrent requests with one key make one release", async () => {
      const { api } = await account();
      const body = completeRelease({ title: "Raced" });
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => api("POST", "/releases", body, { "idempotency-key": "raced" })),
      );
      const ran = answers.filter((r) => r.status === 201 && r.headers.get("idempotent-replayed") === null);
      assert.equal(ran.length, 1, answers.map((r) => r.status).join(","));
      for (const r of answers) {
        if (r.status === 409) assertProblem(r, 409, "idempotency_request_in_progress");
        else {
          assert.equal(r.status, 201);
          assert.deepEqual(r.body, ran[0]?.body);
        }
      }
      assert.equal(await releaseCount(api), 1);
    });

    test("a 5xx is not kept: the retry runs again", async () => {
      const { api } = await account();
      const created = await api<{ id: string }>("POST", "/releases", completeRelease({ title: "Flaky" }));
      assert.equal(created.status, 201);
      const path = `/releases/${created.body.id}/submit`;
      await breakFunction("release_problems", async () => {
        const failed = await api("POST", path, undefined, { "idempotency-key": "after-5xx" });
        assertProblem(failed, 500, "internal_error");
      });
      // The release has no track: once the database is whole, the retry runs and is refused.
      const retry = await api("POST", path, undefined, { "idempotency-key": "after-5xx" });
      assertProblem(retry, 422, "release_incomplete");
      assert.equal(retry.headers.get("idempotent-replayed"), null);
    });

    test("GET and PATCH ignore Idempotency-Key", async () => {
      const { api } = await account();
      const created = await api<{ id: string }>("POST", "/releases", completeRelease());
      const a = await api(
        "PATCH",
        `/releases/${created.body.id}`,
        { title: "One" },
        { "idempotency-key": "p" },
      );
      const b = await api(
        "PATCH",
        `/releases/${created.body.id}`,
        { title: "Two" },
        { "idempotency-key": "p" },
      );
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal((b.body as { title: string }).title, "Two");
      const list = await api("GET", "/releases", undefined, { "idempotency-key": "k".repeat(300) });
      assert.equal(list.status, 200);
    });
  });

  describe("rate limits", () => {
    test("per key: the policy and what is left on every response, then 429 with Retry-After", async () => {
      const limited = (
        await tenantWithKeys(t(), { settings: { public_api_rate_limit: { max: 3, windowSeconds: 60 } } })
      ).tenant;
      const acct = await seedAccount(t().db, limited, "Rate Limited Label");
      const first = await issueTestKey(t().db, acct, { name: "first" });
      const second = await issueTestKey(t().db, acct, { name: "second" });
      // The windows are fixed minutes: start well inside one, so the four requests share it.
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 55_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 200));

      const api = publicApi(app.url, first.secret);
      const remaining: number[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await api("GET", "/rules");
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.headers.get("ratelimit-policy"), '"default";q=3;w=60');
        const m = /^"default";r=(\d+);t=(\d+)$/.exec(r.headers.get("ratelimit") ?? "");
        assert.ok(m, `RateLimit: ${r.headers.get("ratelimit")}`);
        assert.ok(Number(m[2]) >= 1 && Number(m[2]) <= 60);
        remaining.push(Number(m[1]));
      }
      assert.deepEqual(remaining, [2, 1, 0]);

      const over = await api("GET", "/rules");
      assertProblem(over, 429, "rate_limited");
      const retryAfter = Number(over.headers.get("retry-after"));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${retryAfter}`);
      assert.equal(over.headers.get("ratelimit-policy"), '"default";q=3;w=60');
      assert.match(over.headers.get("ratelimit") ?? "", /^"default";r=0;t=\d+$/);
      // Writes are limited alike, before anything runs.
      const write = await api("POST", "/releases", completeRelease());
      assertProblem(write, 429, "rate_limited");

      // Another key of the same account has its own allowance.
      const other = await publicApi(app.url, second.secret)("GET", "/rules");
      assert.equal(other.status, 200);
      assert.match(other.headers.get("ratelimit") ?? "", /^"default";r=2;t=\d+$/);
    });

    test("without a tenant setting: 100 requests per 10 seconds", async () => {
      const { api } = await account();
      // The roomy tenant's setting applies to its keys; a tenant without one gets the default.
      const plain = (await tenantWithKeys(t())).tenant;
      const { key } = await keyedAccount(t().db, { tenant: plain });
      const r = await publicApi(app.url, key.secret)("GET", "/rules");
      assert.equal(r.headers.get("ratelimit-policy"), '"default";q=100;w=10');
      const roomy = await api("GET", "/rules");
      assert.equal(roomy.headers.get("ratelimit-policy"), '"default";q=100000;w=60');
    });
  });

  describe("errors before and around the handlers", () => {
    let key: IssuedKey;
    before(async () => {
      key = (await account()).key;
    });

    test("malformed JSON is 400 invalid_json", async () => {
      const r = await raw(app.url, "POST", RELEASES_PATH, {
        token: key.secret,
        contentType: "application/json",
        body: '{"title": "Night Drive",',
      });
      assertProblem(r, 400, "invalid_json");
    });

    test("a body that is not application/json is 415 unsupported_media_type", async () => {
      for (const [contentType, body] of [
        ["application/xml", "<release><title>x</title></release>"],
        ["application/x-www-form-urlencoded", "title=x"],
      ] as const) {
        const r = await raw(app.url, "POST", RELEASES_PATH, { token: key.secret, contentType, body });
        assertProblem(r, 415, "unsupported_media_type");
      }
    });

    test("a text/plain body is 415 unsupported_media_type too, even when it holds JSON", async () => {
      const r = await raw(app.url, "POST", RELEASES_PATH, {
        token: key.secret,
        contentType: "text/plain",
        body: JSON.stringify(completeRelease()),
      });
      assertProblem(r, 415, "unsupported_media_type");
    });

    test("a body over 1 MiB is 413 body_too_large", async () => {
      const r = await raw(app.url, "POST", RELEASES_PATH, {
        token: key.secret,
        contentType: "application/json",
        body: JSON.stringify({ title: "x".repeat(1024 * 1024) }),
      });
      assertProblem(r, 413, "body_too_large");
    });

    test("a JSON body that is not an object is 400 invalid_body", async () => {
      for (const body of ["[]", '[{"title": "x"}]', '"a string"', "42", "null"]) {
        const r = await raw(app.url, "POST", RELEASES_PATH, {
          token: key.secret,
          contentType: "application/json",
          body,
        });
        assertProblem(r, 400, "invalid_body");
      }
    });

    test("an unknown route under the prefix is 404 route_not_found", async () => {
      for (const [method, path] of [
        ["GET", `${PREFIX}/nothing-here`],
        ["GET", `${PREFIX}/releases/a/b/c/d`],
        ["PUT", RELEASES_PATH],
        ["POST", `${PREFIX}/rules`],
      ] as const) {
        const r = await raw(app.url, method, path, { token: key.secret });
        assertProblem(r, 404, "route_not_found");
        assert.match(String((r.body as { detail: string }).detail), new RegExp(method));
      }
      // Without a key as well: an unknown route is not a question of authentication.
      assertProblem(await raw(app.url, "GET", `${PREFIX}/nothing-here`), 404, "route_not_found");
    });

    test("the caller's X-Request-Id is the problem's request_id", async () => {
      const r = await raw(app.url, "GET", `${PREFIX}/releases`, {
        headers: { "x-request-id": "trace-4711.a:b" },
      });
      assertProblem(r, 401, "missing_api_key");
      assert.equal(r.headers.get("x-request-id"), "trace-4711.a:b");
      assert.equal((r.body as { request_id: string }).request_id, "trace-4711.a:b");
    });

    test("a server failure is 500 internal_error without internals", async () => {
      await breakFunction("release_lead_days", async () => {
        const r = await raw(app.url, "GET", `${PREFIX}/rules`, { token: key.secret });
        assertProblem(r, 500, "internal_error");
        const text = JSON.stringify(r.body);
        assert.doesNotMatch(text, /release_lead_days|function|does not exist|42883/i);
        assert.deepEqual(
          Object.keys(r.body).sort(),
          ["code", "detail", "request_id", "status", "title", "type"],
          "only the problem's own members",
        );
      });
      const healed = await raw(app.url, "GET", `${PREFIX}/rules`, { token: key.secret });
      assert.equal(healed.status, 200);
    });
  });

  /** Runs SQL as the schema owner, outside any caller's context. */
  function asOwner<T extends Record<string, unknown>>(sql: string, params: unknown[] = []) {
    return t().owner.transaction((tx) => tx.query<T>(sql, params), { readOnly: false });
  }

  /** Renames a database function for the duration of `fn`: the API's own SQL then fails (a 500). */
  async function breakFunction(name: string, fn: () => Promise<void>): Promise<void> {
    const found = (
      await asOwner<{ args: string }>(
        `select pg_get_function_identity_arguments(p.oid) as args from pg_proc p
         join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'internal' and p.proname = $1`,
        [name],
      )
    ).rows;
    assert.equal(found.length, 1, `one function internal.${name}`);
    const args = found[0]?.args ?? "";
    await asOwner(`alter function internal.${name}(${args}) rename to ${name}_broken`);
    try {
      await fn();
    } finally {
      await asOwner(`alter function internal.${name}_broken(${args}) rename to ${name}`);
    }
  }
});
