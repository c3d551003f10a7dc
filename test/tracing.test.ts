import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import { loadConfig } from "../src/config.ts";
import { buildApp } from "../src/http/app.ts";
import { startTracing, type Tracing } from "../src/observability/tracing.ts";
import { TEST_ENCRYPTION_KEY } from "./support/app.ts";
import { createTestDb, type TestDb } from "./support/db.ts";

/**
 * OpenTelemetry tracing (docs/operations.md, "Traces") against a real OTLP/HTTP receiver started
 * here: the SDK exports a span per request, named by the route's template, continuing the
 * caller's trace; probes are not traced; without an endpoint the SDK is never loaded.
 */

interface ReceivedSpan {
  traceId: string;
  name: string;
  kind: number;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}

/** A minimal OTLP/HTTP trace receiver (JSON encoding): keeps every span it is sent. */
async function otlpReceiver() {
  const spans: ReceivedSpan[] = [];
  const contentTypes = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      contentTypes.add(String(req.headers["content-type"]));
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans: { scopeSpans: { spans: ReceivedSpan[] }[] }[];
      };
      for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const attribute = (span: ReceivedSpan, key: string) => span.attributes.find((a) => a.key === key)?.value;

describe("tracing", () => {
  let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
  let tracing: Tracing | undefined;
  let t: TestDb;
  let app: ReturnType<typeof buildApp>;
  let url: string;

  before(async () => {
    receiver = await otlpReceiver();
    const config = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: "backline-test",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      LOG_LEVEL: "silent",
    });
    assert.equal(config.tracing?.tracesUrl, `${receiver.url}/v1/traces`);
    tracing = await startTracing(config.tracing, pino({ level: "silent" }));
    t = await createTestDb("pglite");
    app = buildApp({ config, db: t.db, logger: pino({ level: "silent" }) });
    url = await app.listen({ port: 0, host: "127.0.0.1" });
  });
  after(async () => {
    await app?.close();
    await tracing?.shutdown();
    await t?.close();
    await receiver?.close();
  });

  test("a server span per request, named by its route, in the caller's trace; probes untraced", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const ids = [crypto.randomUUID(), crypto.randomUUID()];
    for (const id of ids) {
      const res = await fetch(`${url}/api/public/v1/releases/${id}`, {
        headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      });
      assert.equal(res.status, 401);
    }
    assert.equal((await fetch(`${url}/health`)).status, 200);
    const route = "GET /api/public/v1/releases/:id";
    await until(() => receiver.spans.filter((s) => s.name === route).length === 2, "two spans of the route");
    const spans = receiver.spans.filter((s) => s.name === route);
    for (const span of spans) {
      assert.equal(span.kind, 2, "SERVER");
      assert.equal(span.traceId, traceId, "the caller's trace continues");
      assert.equal(attribute(span, "http.route")?.stringValue, "/api/public/v1/releases/:id");
    }
    assert.ok([...receiver.contentTypes].every((c) => c.startsWith("application/json")));
    // Give a /health span time to arrive, were it sent. The exporter's own calls are not traced
    // (no CLIENT span); the receiver, in this process, is a server like any other (its SERVER spans).
    await new Promise((r) => setTimeout(r, 300));
    for (const span of receiver.spans) {
      assert.ok(!JSON.stringify(span).includes("/health"), `untraced probe: ${span.name}`);
      if (span.kind === 3)
        assert.ok(!JSON.stringify(span).includes("/v1/traces"), "the exporter traced itself");
    }
  });
});

test("without OTEL_EXPORTER_OTLP_ENDPOINT the SDK is not loaded at all", () => {
  assert.equal(loadConfig({}).tracing, undefined);
  // A fresh process loads the server's modules and starts (no) tracing: no module of the SDK is
  // resolved (@opentelemetry/api, the small interface package, comes with prom-client).
  const script = `
    import { registerHooks } from "node:module";
    const seen = [];
    registerHooks({ resolve(spec, ctx, next) { const r = next(spec, ctx); if (r.url.includes("/@opentelemetry/") && !r.url.includes("/@opentelemetry/api/")) seen.push(r.url); return r; } });
    const { startTracing } = await import("./src/observability/tracing.ts");
    await import("./src/start/serve.ts");
    const none = await startTracing(undefined, console);
    console.log(JSON.stringify({ seen, none: none === undefined }));
  `;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}"), { seen: [], none: true });
});
