import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import {
  BacklineApiError,
  createBacklineClient,
  paginate,
  type RetryEvent,
  retryAfterMs,
  unwrap,
  verifyWebhook,
  WebhookVerificationError,
} from "@backline/client";
import { Webhook } from "standardwebhooks";
import { GENERATED, generateTypes } from "../packages/client/scripts/generate.ts";
import { ROOT, tempDir } from "./support/process.ts";

/**
 * packages/client (@backline/client) on its own: its generated types are those of today's API,
 * and what it adds to openapi-fetch — retries with an Idempotency-Key, Retry-After, pagination,
 * problem errors, webhook verification — behaves as docs/clients.md says, against a small HTTP
 * server that answers as told (a stand-in for the network's failures, which a real server does not
 * produce on demand). test/client-quickstart.test.ts drives the client against a real server.
 */

test("the committed generated types are those of today's OpenAPI document", async () => {
  const fresh = await generateTypes();
  const committed = fs.readFileSync(GENERATED, "utf8");
  assert.ok(
    fresh === committed,
    "packages/client/src/generated/openapi.ts is stale: the public API's OpenAPI document changed. " +
      "Run `npm run client:generate` and commit the file.",
  );
  assert.match(committed, /export interface paths \{/);
  assert.match(committed, /export interface webhooks \{/);
});

/** A program that uses the client wrongly: each marked line must fail to compile. */
const MISUSE = `import { createBacklineClient, paginate, unwrap, verifyWebhook } from "@backline/client";
const api = createBacklineClient({ baseUrl: "https://backline.example.com/api/public/v1", apiKey: "bk_test_x" });
// @ts-expect-error: no such path
await api.GET("/release");
// @ts-expect-error: a release's title is a string
await api.POST("/releases", { body: { title: 1, release_type: "single", artist_id: "a" } });
// @ts-expect-error: no such release type
await api.POST("/releases", { body: { title: "x", release_type: "cassette", artist_id: "a" } });
// @ts-expect-error: the path parameter is trackId
await api.GET("/releases/{id}/tracks/{trackId}", { params: { path: { id: "r", track: "t" } } });
const artist = await unwrap(api.GET("/artists/{id}", { params: { path: { id: "a" } } }));
// @ts-expect-error: an artist has no title
artist.title;
// @ts-expect-error: /rules is no cursor list
paginate(api, "/rules");
for await (const r of paginate(api, "/releases")) {
  // @ts-expect-error: status is a union of the statuses
  const s: "nope" = r.status;
}
const event = verifyWebhook("", {}, "whsec_x");
if (event.type === "release.live") {
  const title: string = event.data.object.title;
  // @ts-expect-error: the title is a string
  const n: number = event.data.object.title;
}
// @ts-expect-error: no such event
if (event.type === "release.exploded") {}
`;

test("docs/clients.md's examples compile against the client; misuses of the client do not", async () => {
  const dir = tempDir("backline-client-types-");
  try {
    const doc = fs.readFileSync(path.join(ROOT, "docs/clients.md"), "utf8");
    const examples = [...doc.matchAll(/^```ts (?:runnable|template)\n([\s\S]*?)^```$/gm)]
      .map((m) => m[1] ?? "")
      .filter((body) => body.includes("@backline/client"));
    assert.ok(examples.length >= 3, `found ${examples.length} examples`);
    examples.forEach((body, i) => {
      fs.writeFileSync(path.join(dir, `example-${i}.mts`), body);
    });
    fs.writeFileSync(path.join(dir, "misuse.mts"), MISUSE);
    fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
    fs.writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2024",
          module: "nodenext",
          moduleResolution: "nodenext",
          lib: ["es2024"],
          types: ["node"],
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          skipLibCheck: true,
        },
        include: ["*.mts"],
      }),
    );
    const tsc = path.join(ROOT, "node_modules/.bin/tsc");
    const out = await promisify(execFile)(tsc, ["-p", dir], { cwd: dir }).then(
      () => "",
      (e: { stdout?: string }) => e.stdout ?? String(e),
    );
    assert.equal(out, "", out);
    // And the marks are needed: without them, each misuse is an error.
    fs.writeFileSync(path.join(dir, "misuse.mts"), MISUSE.replaceAll("// @ts-expect-error", "//"));
    const errors = await promisify(execFile)(tsc, ["-p", dir], { cwd: dir }).then(
      () => "",
      (e: { stdout?: string }) => e.stdout ?? "",
    );
    const lines = new Set([...errors.matchAll(/misuse\.mts\((\d+),/g)].map((m) => m[1]));
    assert.equal(lines.size, MISUSE.split("@ts-expect-error").length - 1, errors);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

/** Answers the nth request (from 1) as `reply` says: a status, or "drop" to cut the connection. */
type Reply = { status: number; headers?: Record<string, string>; body?: unknown } | "drop";

async function stubServer(reply: (n: number, seen: Seen) => Reply) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const s: Seen = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      };
      seen.push(s);
      const r = reply(seen.length, s);
      if (r === "drop") {
        req.socket.destroy();
        return;
      }
      const json = r.body === undefined ? "" : JSON.stringify(r.body);
      res
        .writeHead(r.status, {
          ...(json
            ? { "content-type": r.status >= 400 ? "application/problem+json" : "application/json" }
            : {}),
          ...r.headers,
        })
        .end(json);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    seen,
    baseUrl: `http://127.0.0.1:${port}/api/public/v1`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
  type: `https://backline.dev/errors/${code}`,
  title: "x",
  status,
  code,
  detail: `${code} happened`,
  request_id: "req-1",
  ...extra,
});

const artist = { id: "8a1f7c2e-0000-4000-8000-000000000001", object: "artist", name: "Luna Vale" };

describe("retries", () => {
  test("a POST gets an Idempotency-Key, the same on each attempt, and a 503's Retry-After is waited for", async () => {
    const stub = await stubServer((n) =>
      n === 1
        ? { status: 503, headers: { "retry-after": "1" }, body: problem(503, "too_many_connections") }
        : { status: 201, body: artist },
    );
    const retries: RetryEvent[] = [];
    try {
      const api = createBacklineClient({
        baseUrl: stub.baseUrl,
        apiKey: "bk_test_x",
        onRetry: (r) => retries.push(r),
      });
      const created = await unwrap(api.POST("/artists", { body: { name: "Luna Vale" } }));
      assert.equal(created.name, "Luna Vale");
      assert.equal(stub.seen.length, 2);
      const [first, second] = stub.seen as [Seen, Seen];
      const key = first.headers["idempotency-key"];
      assert.match(String(key), /^[0-9a-f-]{36}$/);
      assert.equal(second.headers["idempotency-key"], key);
      assert.equal(second.body, first.body, "the retry sends the same body");
      assert.equal(first.headers.authorization, "Bearer bk_test_x");
      assert.ok(second.at - first.at >= 950, `waited ${second.at - first.at} ms for Retry-After: 1`);
      assert.deepEqual(
        retries.map((r) => [r.attempt, r.reason, r.delayMs, r.idempotencyKey]),
        [[1, 503, 1000, key]],
      );
    } finally {
      await stub.close();
    }
  });

  test("a key the caller gives is kept; 429s are retried up to the limit, then the 429 is the answer", async () => {
    const stub = await stubServer(() => ({
      status: 429,
      headers: { "retry-after": "0" },
      body: problem(429, "rate_limited"),
    }));
    try {
      const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k", retries: 2 });
      const res = await api.POST("/artists", {
        body: { name: "x" },
        params: { header: { "Idempotency-Key": "my-key-1" } },
      });
      assert.equal(res.response.status, 429);
      assert.equal(res.error?.code, "rate_limited");
      assert.deepEqual(
        stub.seen.map((s) => s.headers["idempotency-key"]),
        ["my-key-1", "my-key-1", "my-key-1"],
      );
    } finally {
      await stub.close();
    }
  });

  test("a Retry-After longer than the client waits for is answered at once", async () => {
    const stub = await stubServer(() => ({
      status: 429,
      headers: { "retry-after": "3600" },
      body: problem(429, "reveal_attempts_exceeded"),
    }));
    try {
      const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k" });
      await assert.rejects(unwrap(api.GET("/artists")), (e: unknown) => {
        assert.ok(e instanceof BacklineApiError);
        assert.equal(e.status, 429);
        assert.equal(e.code, "reveal_attempts_exceeded");
        assert.equal(e.requestId, "req-1");
        return true;
      });
      assert.equal(stub.seen.length, 1);
    } finally {
      await stub.close();
    }
  });

  test("409 idempotency_request_in_progress is retried; another 409 is not", async () => {
    const stub = await stubServer((n) =>
      n === 1
        ? {
            status: 409,
            headers: { "retry-after": "0" },
            body: problem(409, "idempotency_request_in_progress"),
          }
        : n === 2
          ? { status: 201, body: artist }
          : { status: 409, headers: { "retry-after": "0" }, body: problem(409, "artist_in_use") },
    );
    try {
      const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k" });
      assert.equal((await unwrap(api.POST("/artists", { body: { name: "x" } }))).id, artist.id);
      const res = await api.DELETE("/artists/{id}", { params: { path: { id: artist.id } } });
      assert.equal(res.error?.code, "artist_in_use");
      assert.equal(stub.seen.length, 3);
    } finally {
      await stub.close();
    }
  });

  test("a dropped connection is retried for a POST (same key) but not for a PATCH", async () => {
    const stub = await stubServer((n, s) =>
      s.method === "PATCH" || n === 1 ? "drop" : { status: 201, body: artist },
    );
    try {
      const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k", baseDelayMs: 10 });
      assert.equal((await unwrap(api.POST("/artists", { body: { name: "x" } }))).id, artist.id);
      assert.equal(stub.seen.length, 2);
      assert.equal(stub.seen[0]?.headers["idempotency-key"], stub.seen[1]?.headers["idempotency-key"]);
      await assert.rejects(
        api.PATCH("/artists/{id}", { params: { path: { id: artist.id } }, body: { name: "y" } }),
        TypeError,
      );
      assert.equal(stub.seen.length, 3, "the PATCH was sent once");
    } finally {
      await stub.close();
    }
  });

  test("Retry-After is read as seconds or as an HTTP date", () => {
    assert.equal(retryAfterMs("2"), 2000);
    assert.equal(retryAfterMs(new Date(10_000).toUTCString(), 4_000), 6000);
    assert.equal(retryAfterMs(null), undefined);
    assert.equal(retryAfterMs("soon"), undefined);
  });
});

describe("errors and pages", () => {
  let stub: Awaited<ReturnType<typeof stubServer>>;
  const names = ["A", "B", "C", "D", "E"];

  before(async () => {
    stub = await stubServer((_n, s) => {
      const url = new URL(s.url, "http://x");
      if (s.method === "POST") {
        return {
          status: 422,
          body: problem(422, "validation_failed", {
            param: "name",
            errors: [{ param: "name", code: "required", message: "name is required" }],
          }),
        };
      }
      if (url.pathname.endsWith("/nothing")) return { status: 502, body: undefined };
      const limit = Number(url.searchParams.get("limit") ?? 20);
      const after = url.searchParams.get("starting_after");
      const from = after ? names.indexOf(after) + 1 : 0;
      const data = names.slice(from, from + limit).map((n) => ({ id: n, object: "artist", name: n }));
      return { status: 200, body: { object: "list", data, limit, has_more: from + limit < names.length } };
    });
  });
  after(() => stub.close());

  test("paginate walks the cursor pages to the end, each page after the last item's id", async () => {
    const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k" });
    const start = stub.seen.length;
    const got: string[] = [];
    for await (const a of paginate(api, "/artists", { params: { query: { limit: 2 } } })) got.push(a.name);
    assert.deepEqual(got, names);
    assert.deepEqual(
      stub.seen.slice(start).map((s) => new URL(s.url, "http://x").searchParams.get("starting_after")),
      [null, "B", "D"],
    );
    const two: string[] = [];
    for await (const a of paginate(api, "/artists", { params: { query: { limit: 2 } }, max: 3 }))
      two.push(a.name);
    assert.deepEqual(two, ["A", "B", "C"]);
  });

  test("an error answer is a BacklineApiError with its code and fields; a non-problem answer too", async () => {
    const api = createBacklineClient({ baseUrl: stub.baseUrl, apiKey: "k" });
    const err = await unwrap(api.POST("/artists", { body: { name: "" } })).catch((e: unknown) => e);
    assert.ok(err instanceof BacklineApiError);
    assert.equal(err.status, 422);
    assert.equal(err.code, "validation_failed");
    assert.equal(err.field("name")?.code, "required");
    assert.match(err.message, /^422 validation_failed: /);
    const other = await unwrap(api.GET("/nothing" as "/artists")).catch((e: unknown) => e);
    assert.ok(other instanceof BacklineApiError);
    assert.equal(other.code, "http_502");
    assert.equal(other.problem, undefined);
  });

  test("a client needs a credential", () => {
    assert.throws(() => createBacklineClient({ baseUrl: stub.baseUrl }), /apiKey/);
  });
});

describe("verifyWebhook", () => {
  const secret = `whsec_${Buffer.from("0123456789abcdef0123456789abcdef").toString("base64")}`;
  const other = `whsec_${Buffer.from("fedcba9876543210fedcba9876543210").toString("base64")}`;
  const event = {
    id: "msg_1",
    type: "webhook.test",
    created: new Date().toISOString(),
    sequence: 1,
    account_id: "a",
    data: { object: { object: "webhook_test", endpoint_id: "e", message: "hi" } },
  };
  const body = JSON.stringify(event);
  const signed = (s: string, at = new Date()) => ({
    "webhook-id": "msg_1",
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(s).sign("msg_1", at, body),
  });

  test("returns the typed event for the right secret, from Node's headers or a Headers", () => {
    const e = verifyWebhook(body, signed(secret), secret);
    assert.equal(e.type, "webhook.test");
    if (e.type === "webhook.test") assert.equal(e.data.object.message, "hi");
    assert.equal(verifyWebhook(Buffer.from(body), new Headers(signed(secret)), secret).id, "msg_1");
  });

  test("any of several secrets verifies it (a rotation); a wrong or stale one throws", () => {
    assert.equal(verifyWebhook(body, signed(other), [secret, other]).id, "msg_1");
    assert.throws(() => verifyWebhook(body, signed(other), secret), WebhookVerificationError);
    assert.throws(() => verifyWebhook(`${body} `, signed(secret), secret), WebhookVerificationError);
    assert.throws(
      () => verifyWebhook(body, signed(secret, new Date(Date.now() - 10 * 60_000)), secret),
      WebhookVerificationError,
    );
    assert.throws(() => verifyWebhook(body, signed(secret), []), WebhookVerificationError);
  });
});
