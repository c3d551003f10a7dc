// Issue 20, item 3: one endpoint that hangs (never answers; every send runs into the 15 s time
// limit) must not delay the other endpoints' deliveries. Measures the healthy endpoints' latency,
// from the event's commit to its arrival, with no hanging endpoint, with one and the per-endpoint
// cap of sends in flight (WEBHOOK_ENDPOINT_CONCURRENCY, 10), and with one and no cap (the cap
// equal to the dispatcher's concurrency: how it was before). Figures in bench/README.md.
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher.ts";
import { newSigningSecret, SecretBox } from "../../src/webhooks/secrets.ts";
import { ADMIN_URL, withDatabase } from "../support.ts";
import { EVENT_TYPE, percentile, releaseData } from "./shared.ts";

const RATE = Number(process.env.BENCH_RATE ?? 40); // events/s, each to every endpoint
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const CAP = Number(process.env.BENCH_CAP ?? 10);
const HEALTHY = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Healthy endpoints answer 204 at once and note when each webhook-id arrived; /hang/* never answers. */
const arrived = new Map<string, number>();
const hanging = new Set<http.ServerResponse>();
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    if (req.url?.startsWith("/hang/")) {
      hanging.add(res);
      res.on("close", () => hanging.delete(res));
      return;
    }
    arrived.set(`${req.url}:${req.headers["webhook-id"]}`, performance.now());
    res.writeHead(204).end();
  });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const dbName = `backline_bench_hanging_${process.pid}`;
const admin = new pg.Client({ connectionString: ADMIN_URL });
await admin.connect();
await admin.query(rolesSetupSql("authenticator"));
await admin.query(`create database ${dbName}`);
const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
await migrate(owner);
await owner.close();
const url = withDatabase(ADMIN_URL, dbName, "authenticator");
const box = new SecretBox(randomBytes(32));
const db = new Db(new PostgresEngine({ url, poolSize: 4, applicationName: "bench-writer" }), {
  secrets: box,
});
const { tenant } = await createTenant(db, { name: "Hanging bench", slug: `hanging-${process.pid}` });

interface Scenario {
  name: string;
  hanging: boolean;
  perEndpoint: number;
}

async function run(s: Scenario, n: number) {
  const account = await createAccount(db, { tenantId: tenant.id, name: `Scenario ${n}` });
  const paths = Array.from({ length: HEALTHY }, (_, i) => `/ok/${n}/${i}`);
  const endpoints: string[] = [];
  for (const p of [...paths, ...(s.hanging ? [`/hang/${n}`] : [])]) {
    const r = await db.asService((tx) =>
      tx.query<{ id: string }>(
        `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
         values ($1, $2, $3, $4) returning id`,
        [account.id, `${base}${p}`, [EVENT_TYPE], box.encrypt(newSigningSecret())],
      ),
    );
    endpoints.push(r.rows[0]?.id as string);
  }
  const dispatcher = new WebhookDispatcher({
    db: new Db(new PostgresEngine({ url, poolSize: 10, applicationName: "bench-dispatcher" }), {
      secrets: box,
    }),
    secrets: box,
    allowPrivate: true,
    concurrency: CONCURRENCY,
    perEndpoint: s.perEndpoint,
    timeoutMs: 15_000,
    logger: {
      info: () => {},
      warn: (o: unknown, m?: string) => console.error("dispatcher warn", m, o),
      error: (o: unknown, m?: string) => console.error("dispatcher error", m, o),
    },
  });
  dispatcher.start();
  await sleep(300);
  const committed = new Map<string, number>();
  const start = performance.now();
  const writes: Promise<void>[] = [];
  for (let i = 0; i < RATE * SECONDS; i++) {
    const wait = start + (i * 1000) / RATE - performance.now();
    if (wait >= 1) await sleep(wait);
    writes.push(
      db
        .asService(async (tx) => {
          const r = await tx.query<{ id: string }>(
            "insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, $3, $4::jsonb) returning id",
            [tenant.id, account.id, EVENT_TYPE, JSON.stringify(releaseData(account.id, i))],
          );
          return r.rows[0]?.id as string;
        })
        .then((id) => {
          committed.set(id, performance.now());
        }),
    );
  }
  await Promise.all(writes);
  // Wait for every healthy delivery (at most 60 s).
  const expected = committed.size * HEALTHY;
  const deadline = performance.now() + 60_000;
  const count = () =>
    [...committed.keys()].reduce((a, id) => a + paths.filter((p) => arrived.has(`${p}:${id}`)).length, 0);
  while (count() < expected && performance.now() < deadline) await sleep(100);
  const delays: number[] = [];
  let missing = 0;
  for (const [id, at] of committed) {
    for (const p of paths) {
      const got = arrived.get(`${p}:${id}`);
      if (got === undefined) missing++;
      else delays.push(got - at);
    }
  }
  delays.sort((a, b) => a - b);
  // The hanging endpoint goes (its deliveries with it), and its sends in flight are answered so the dispatcher stops.
  await db.asService((tx) =>
    tx.query("update internal.webhook_endpoints set enabled = false where id = any($1::uuid[])", [endpoints]),
  );
  for (const res of hanging) res.writeHead(204).end();
  await dispatcher.stop();
  await db.asService((tx) =>
    tx.query("delete from internal.webhook_endpoints where id = any($1::uuid[])", [endpoints]),
  );
  return {
    name: s.name,
    deliveries: delays.length,
    missing,
    p50: percentile(delays, 50),
    p90: percentile(delays, 90),
    p99: percentile(delays, 99),
    max: delays.at(-1) ?? Number.NaN,
  };
}

const scenarios: Scenario[] = [
  { name: "no hanging endpoint", hanging: false, perEndpoint: CAP },
  { name: `one hanging endpoint, cap ${CAP} per endpoint`, hanging: true, perEndpoint: CAP },
  {
    name: `one hanging endpoint, no cap (${CONCURRENCY}, as before)`,
    hanging: true,
    perEndpoint: CONCURRENCY,
  },
];
const results = [];
try {
  for (const [i, s] of scenarios.entries()) results.push(await run(s, i));
} finally {
  await db.close();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  server.close();
  server.closeAllConnections();
}
console.log(
  `${RATE} events/s for ${SECONDS} s to ${HEALTHY} healthy endpoints (and the hanging one); dispatcher concurrency ${CONCURRENCY}; ${os.cpus().length} cores, load ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
console.log("| scenario | healthy deliveries | not arrived in 60 s | p50 ms | p90 ms | p99 ms | max ms |");
console.log("|---|---|---|---|---|---|---|");
for (const r of results) {
  console.log(
    `| ${r.name} | ${r.deliveries} | ${r.missing} | ${r.p50.toFixed(1)} | ${r.p90.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} |`,
  );
}
