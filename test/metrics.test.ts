import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import pino from "pino";
import { loadConfig } from "../src/config.ts";
import { buildApp } from "../src/http/app.ts";
import { createMetrics, listenForMetrics } from "../src/observability/http.ts";
import { createAccount } from "../src/tenancy/tenants.ts";
import { newSigningSecret } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, TEST_ENCRYPTION_KEY, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine, testSecrets } from "./support/db.ts";
import { freePort, startServer, tempDir } from "./support/process.ts";
import { startWorkerProcess } from "./support/worker-process.ts";

/**
 * GET /metrics over real HTTP (docs/operations.md, "Metrics and alerts"): request counts and
 * latency by interface, route template and status; the queue, webhook and delivery gauges read
 * from rows made here; the token; the separate port.
 */

const TOKEN = "metrics-test-token-0123456789abcdef";

/** One sample's value, or undefined: `labels` must all match (others may be present). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries(
      [...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** A sample that must be there. */
function must(text: string, name: string, labels: Record<string, string> = {}): number {
  const value = sample(text, name, labels);
  assert.ok(value !== undefined, `${name} ${JSON.stringify(labels)} is missing`);
  return value;
}

async function scrape(url: string, token: string | undefined = TOKEN): Promise<string> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  assert.equal(res.status, 200, await res.clone().text());
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return res.text();
}

describeEachEngine("metrics", (t) => {
  let app: RunningApp;
  const metricsUrl = () => `${app.url}/metrics`;
  const owner = (sql: string, params: unknown[] = []) =>
    t().owner.transaction((tx) => tx.query<Record<string, unknown>>(sql, params), { readOnly: false });
  /** Inserts one row (`returning id`) and gives its id. */
  const insertId = async (sql: string, params: unknown[]) => {
    const id = (await owner(sql, params)).rows[0]?.id;
    assert.ok(typeof id === "string");
    return id;
  };

  before(async () => {
    app = await startApp(t(), { METRICS_TOKEN: TOKEN });
  });
  after(() => app.close());

  test("401 without the token or with a wrong one, with a problem body; 200 with it", async () => {
    for (const authorization of [undefined, "Bearer wrong-token-wrong-token-00", `Basic ${TOKEN}`, TOKEN]) {
      const res = await fetch(metricsUrl(), { headers: authorization ? { authorization } : {} });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="metrics"');
      assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/);
      const body = (await res.json()) as { code: string; status: number; detail: string };
      assert.equal(body.code, "metrics_unauthorized");
      assert.equal(body.status, 401);
      assert.ok(!JSON.stringify(body).includes(TOKEN));
    }
    const text = await scrape(metricsUrl());
    assert.ok(must(text, "backline_process_resident_memory_bytes") > 0, "process metrics");
    assert.ok(sample(text, "backline_nodejs_eventloop_lag_seconds") !== undefined, "event loop lag");
    const size = must(text, "backline_db_pool_size", { engine: t().kind });
    assert.ok(t().kind === "pglite" ? size === 1 : size >= 1, `pool size ${size}`);
    assert.equal(sample(text, "backline_db_pool_idle", { engine: t().kind }) !== undefined, true);
    assert.equal(sample(text, "backline_db_pool_waiting", { engine: t().kind }), 0);
    assert.equal(sample(text, "backline_metrics_database_up"), 1);
  });

  test("requests counted by interface, route template and status; the histogram moves", async () => {
    const before = await scrape(metricsUrl());
    const health = { interface: "health", method: "GET", route: "/health", status: "200" };
    const count0 = sample(before, "backline_http_requests_total", health) ?? 0;
    const latency = { interface: "health", method: "GET", route: "/health" };
    const hist0 = sample(before, "backline_http_request_duration_seconds_count", latency) ?? 0;
    const inf0 =
      sample(before, "backline_http_request_duration_seconds_bucket", { ...latency, le: "+Inf" }) ?? 0;
    for (let i = 0; i < 3; i++) assert.equal((await fetch(`${app.url}/health`)).status, 200);
    // Many ids, one route label each: the template, never the raw path.
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      const id = crypto.randomUUID();
      ids.push(id);
      await (await fetch(`${app.url}/api/public/v1/releases/${id}`)).arrayBuffer();
      await (await fetch(`${app.url}/rest/v1/table_${i}?id=eq.${id}`)).arrayBuffer();
      await (await fetch(`${app.url}/no/such/${id}`)).arrayBuffer();
    }
    const text = await scrape(metricsUrl());
    assert.equal(sample(text, "backline_http_requests_total", health), count0 + 3);
    assert.equal(sample(text, "backline_http_request_duration_seconds_count", latency), hist0 + 3);
    assert.equal(
      sample(text, "backline_http_request_duration_seconds_bucket", { ...latency, le: "+Inf" }),
      inf0 + 3,
    );
    assert.ok(must(text, "backline_http_request_duration_seconds_bucket", { ...latency, le: "1" }) >= 3);
    for (const id of ids) assert.ok(!text.includes(id), "no raw id in any label");
    const routes = (iface: string) =>
      new Set(
        text
          .split("\n")
          .filter((l) => l.startsWith("backline_http_requests_total{") && l.includes(`interface="${iface}"`))
          .map((l) => /route="([^"]*)"/.exec(l)?.[1]),
      );
    assert.deepEqual([...routes("public-api")], ["/api/public/v1/releases/:id"]);
    assert.deepEqual([...routes("rest")], ["/rest/v1/*"]);
    assert.deepEqual([...routes("other")], ["(unmatched)"]);
    assert.equal(
      sample(text, "backline_http_requests_total", {
        interface: "public-api",
        route: "/api/public/v1/releases/:id",
        status: "401",
      }),
      25,
    );
    assert.equal(sample(text, "backline_http_requests_total", { interface: "other", status: "404" }), 25);
    assert.equal(
      sample(text, "backline_http_requests_total", {
        interface: "metrics",
        route: "/metrics",
        status: "200",
      }) !== undefined,
      true,
    );
  });

  test("job, webhook, delivery and import gauges reflect the rows", async () => {
    const { tenant } = await tenantWithKeys(t());
    const account = await createAccount(t().db, { tenantId: tenant.id, name: "Gauges" });
    // Jobs: 2 ready (the oldest 5 minutes late), 1 for later, 1 running, 3 dead.
    await owner(
      `insert into internal.jobs (kind, status, run_at) values
         ('metrics.test', 'queued', now() - interval '5 minutes'), ('metrics.test', 'queued', now()),
         ('metrics.test', 'queued', now() + interval '1 hour'),
         ('metrics.test', 'running', now()),
         ('metrics.dead', 'dead', now()), ('metrics.dead', 'dead', now()), ('metrics.dead', 'dead', now())`,
    );
    // Webhooks: an endpoint, three events fanned out to it; one delivery retried once, one failed for good.
    const endpointId = await insertId(
      `insert into internal.webhook_endpoints (tenant_id, account_id, url, events, secret_ciphertext, failing_since)
         values ($1, $2, 'https://hooks.example.com/in', '{release.live}', $3, now() - interval '2 hours') returning id::text`,
      [tenant.id, account.id, testSecrets().encrypt(newSigningSecret())],
    );
    for (let i = 0; i < 3; i++) {
      await owner(
        `insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, 'release.live', '{"object":{"id":"r"}}')`,
        [tenant.id, account.id],
      );
    }
    await owner(
      `update internal.webhook_deliveries set attempts = 1
        where id = (select id from internal.webhook_deliveries where endpoint_id = $1 order by position limit 1)`,
      [endpointId],
    );
    await owner(
      `update internal.webhook_deliveries set status = 'failed', attempts = 10
        where id = (select id from internal.webhook_deliveries where endpoint_id = $1 order by position desc limit 1)`,
      [endpointId],
    );
    // Deliveries: two releases, one pending at spotify, one in error at spotify.
    const artistId = await insertId(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Luna Vale') returning id",
      [account.id],
    );
    for (const status of ["pending", "error"]) {
      const releaseId = await insertId(
        "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Gauge') returning id",
        [account.id, artistId],
      );
      await owner(
        `insert into internal.release_deliveries (release_id, account_id, tenant_id, store, status, created_at)
         values ($1, $2, $3, 'spotify', $4, now() - interval '10 minutes')`,
        [releaseId, account.id, tenant.id, status],
      );
    }
    // A royalty import that stopped reporting a minute ago.
    await owner(
      `insert into internal.royalty_import_runs (id, tenant_id, format, phase, bytes_read, lines, started_at, updated_at)
       values (gen_random_uuid(), $1, 'backline', 'importing', 4096, 120, now() - interval '2 minutes', now() - interval '1 minute')`,
      [tenant.id],
    );

    const text = await scrape(metricsUrl());
    const kind = { kind: "metrics.test" };
    assert.equal(sample(text, "backline_jobs_queued", kind), 3);
    assert.equal(sample(text, "backline_jobs_ready", kind), 2);
    assert.equal(sample(text, "backline_jobs_running", kind), 1);
    const oldest = must(text, "backline_jobs_oldest_ready_age_seconds", kind);
    assert.ok(oldest >= 299 && oldest < 400, `oldest ready job ${oldest}s`);
    assert.equal(sample(text, "backline_jobs_dead", { kind: "metrics.dead" }), 3);
    assert.equal(sample(text, "backline_webhook_backlog"), 2);
    assert.equal(sample(text, "backline_webhook_deliveries_failed"), 1);
    assert.equal(sample(text, "backline_webhook_endpoints_failing"), 1);
    const ep = { endpoint: endpointId };
    assert.equal(sample(text, "backline_webhook_endpoint_backlog", ep), 2);
    assert.equal(sample(text, "backline_webhook_endpoint_retrying", ep), 1);
    const failing = must(text, "backline_webhook_endpoint_failing_seconds", ep);
    assert.ok(failing >= 7199 && failing < 7300, `failing for ${failing}s`);
    assert.equal(sample(text, "backline_deliveries_open", { store: "spotify", status: "pending" }), 1);
    assert.equal(sample(text, "backline_deliveries_open", { store: "spotify", status: "error" }), 1);
    assert.ok(
      must(text, "backline_deliveries_oldest_open_age_seconds", { store: "spotify", status: "error" }) >= 599,
    );
    assert.equal(sample(text, "backline_royalty_imports_running"), 1);
    assert.equal(sample(text, "backline_royalty_import_lines_read"), 120);
    assert.ok(must(text, "backline_royalty_import_stalled_seconds") >= 59);

    // Rows that go away leave no stale series behind.
    await owner("update internal.jobs set status = 'succeeded' where kind like 'metrics.%'");
    const later = await scrape(metricsUrl());
    assert.equal(sample(later, "backline_jobs_queued", kind), undefined);
    assert.equal(sample(later, "backline_jobs_dead", { kind: "metrics.dead" }), undefined);
  });

  test("webhook endpoints reported one by one: at most 10, the totals cover them all", async () => {
    const { tenant } = await tenantWithKeys(t());
    const account = await createAccount(t().db, { tenantId: tenant.id, name: "Many endpoints" });
    const box = testSecrets();
    for (let i = 0; i < 14; i++) {
      await owner(
        `insert into internal.webhook_endpoints (tenant_id, account_id, url, events, secret_ciphertext, failing_since)
         values ($1, $2, $3, '{release.live}', $4, now())`,
        [tenant.id, account.id, `https://hooks.example.com/${i}`, box.encrypt(newSigningSecret())],
      );
    }
    await owner(
      `insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, 'release.live', '{"object":{"id":"r"}}')`,
      [tenant.id, account.id],
    );
    const text = await scrape(metricsUrl());
    const series = (name: string) => text.split("\n").filter((l) => l.startsWith(`${name}{`)).length;
    assert.equal(series("backline_webhook_endpoint_backlog"), 10);
    assert.equal(series("backline_webhook_endpoint_failing_seconds"), 10);
    assert.ok(must(text, "backline_webhook_backlog") >= 14);
    assert.ok(must(text, "backline_webhook_endpoints_failing") >= 14);
  });

  test("a scrape while every connection is taken and a transaction waits: answered at once, without adding to the queue", async () => {
    await scrape(metricsUrl());
    const size = t().db.poolStats()?.size ?? 1;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const holders = Array.from({ length: size }, () =>
      t().db.asService(async (tx) => {
        await tx.query("select 1");
        await gate;
      }),
    );
    const waiter = t().db.asService((tx) => tx.query("select 1"));
    try {
      const deadline = Date.now() + 5000;
      while ((t().db.poolStats()?.waiting ?? 0) < 1) {
        assert.ok(Date.now() < deadline, "the waiter never queued");
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 300));
      const started = performance.now();
      const text = await scrape(metricsUrl());
      const took = performance.now() - started;
      assert.ok(took < 700, `scrape took ${took} ms`);
      assert.equal(must(text, "backline_db_pool_in_use", { engine: t().kind }), size);
      // Ours, and on PostgreSQL perhaps the rate limiter's exchange (background work of the app).
      assert.ok(must(text, "backline_db_pool_waiting", { engine: t().kind }) >= 1);
      // The figures shown are those of the scrape before: none was read behind the waiter.
      assert.ok(must(text, "backline_metrics_database_age_seconds") >= 0.3);
    } finally {
      open();
      await Promise.all([...holders, waiter]);
    }
  });

  test("a `backline worker` process is scraped on METRICS_PORT", async (ctx) => {
    const url = t().url;
    if (!url) return ctx.skip("the worker process shares the database on PostgreSQL only");
    const port = await freePort();
    const worker = await startWorkerProcess({
      DATABASE_URL: url,
      METRICS_PORT: String(port),
      METRICS_TOKEN: TOKEN,
    });
    try {
      const text = await scrape(`http://127.0.0.1:${port}/metrics`);
      assert.equal(must(text, "backline_metrics_database_up"), 1);
      assert.ok(text.includes("# TYPE backline_jobs_dead gauge"));
      assert.ok(must(text, "backline_process_resident_memory_bytes") > 0);
      assert.equal(sample(text, "backline_http_requests_total"), undefined, "a worker answers no API");
      assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 401);
    } finally {
      assert.equal((await worker.stop()).code, 0);
    }
  });

  test("`npm start` with METRICS_PORT: the API's requests counted, scraped on the other port", async (ctx) => {
    const url = t().url;
    if (!url) return ctx.skip("a second process on the test's database: PostgreSQL only");
    const dataDir = tempDir();
    const port = await freePort();
    const server = await startServer({
      DATA_DIR: dataDir,
      DATABASE_URL: url,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      WORKER: "off",
      METRICS_PORT: String(port),
    });
    try {
      assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
      const text = await scrape(`http://127.0.0.1:${port}/metrics`, undefined);
      assert.ok(must(text, "backline_http_requests_total", { route: "/health", status: "200" }) >= 1);
      assert.equal(must(text, "backline_http_requests_total", { route: "(unmatched)", status: "404" }), 1);
      assert.equal(must(text, "backline_db_pool_size", { engine: "postgres" }), 10);
    } finally {
      assert.equal(await server.stop(), 0);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("METRICS_PORT: /metrics on its own port only, with the token when one is set", async () => {
    for (const token of [undefined, TOKEN]) {
      const port = await freePort();
      // Two free ports asked one after the other may be the same one (neither is held yet).
      let metricsPort = await freePort();
      while (metricsPort === port) metricsPort = await freePort();
      const config = loadConfig({
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        ...(token ? { METRICS_TOKEN: token } : {}),
        LOG_LEVEL: "silent",
        ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      });
      const logger = pino({ level: "silent" });
      const metrics = createMetrics(config, t().db);
      const api = buildApp({ config, db: t().db, logger, metrics });
      await api.listen({ port, host: "127.0.0.1" });
      const server = await listenForMetrics(config.metrics, metrics, logger);
      try {
        assert.ok(server);
        assert.equal(server.url, `http://127.0.0.1:${metricsPort}/metrics`);
        // Not on the API's port.
        assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 404);
        assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
        if (token) {
          const refused = await fetch(server.url);
          assert.equal(refused.status, 401);
          assert.equal(((await refused.json()) as { code: string }).code, "metrics_unauthorized");
          assert.equal(
            (await fetch(server.url, { headers: { authorization: "Bearer nope-nope-nope-nope" } })).status,
            401,
          );
        }
        const text = await scrape(server.url, token);
        assert.equal(sample(text, "backline_http_requests_total", { route: "/health", status: "200" }), 1);
        assert.equal(
          sample(text, "backline_http_requests_total", { route: "(unmatched)", status: "404" }),
          1,
        );
        assert.equal(sample(text, "backline_metrics_database_up"), 1);
        assert.equal((await fetch(server.url.replace("/metrics", "/other"))).status, 404);
      } finally {
        await server?.close();
        await api.close();
      }
    }
  });
});

test("metrics off by default: no /metrics route, nothing made", () => {
  const config = loadConfig({});
  assert.equal(config.metrics.token, undefined);
  assert.equal(config.metrics.port, undefined);
  assert.equal(createMetrics(config, {} as never), undefined);
});
