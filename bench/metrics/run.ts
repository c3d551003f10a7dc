// What the metrics cost a request (docs/operations.md, "Metrics and alerts"):
//
//   npm run bench:metrics        # BENCH_DURATION=5 s per measurement, BENCH_ROUNDS=3, BENCH_CONNECTIONS=10
//
// 1. Metrics.observe() alone, the work the onResponse hook adds, in ns per request.
// 2. The real app (bench/metrics/server.ts, PGlite in memory) in its own process, with /metrics
//    off and on, measured in turn (order alternating) by autocannon from this process: GET /health
//    (no database: the hook's cost is the largest share there) and GET /ready (a database
//    transaction, as most requests).
// 3. The time a scrape takes, the database's figures included.
import { type ChildProcess, spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { Metrics } from "../../src/observability/metrics.ts";
import {
  average,
  CONNECTIONS,
  DURATION,
  freePort,
  type Measure,
  ROOT,
  ROUNDS,
  SMOKE,
  WARMUP,
} from "../support.ts";

const TOKEN = "bench-metrics-token-0123456789abcdef";

/** CPU time (not wall time, which other processes on a shared machine stretch) per observe(), in ns. */
function micro(): number {
  const metrics = new Metrics({
    db: { kind: "pglite", poolStats: () => undefined } as never,
    processMetrics: false,
  });
  const routes = ["/rest/v1/*", "/api/public/v1/releases/:id", "/health", "/auth/v1/token"];
  const statuses = [200, 200, 200, 404, 401];
  const n = SMOKE ? 100_000 : 2_000_000;
  const observe = (i: number) =>
    metrics.observe(
      "rest",
      "GET",
      routes[i % 4] as string,
      statuses[i % 5] as number,
      0.004 + (i % 100) / 1000,
    );
  for (let i = 0; i < n / 10; i++) observe(i);
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) observe(i);
  const used = process.cpuUsage(before);
  return ((used.user + used.system) * 1000) / n;
}

interface Server {
  child: ChildProcess;
  url: string;
}

async function start(metricsOn: boolean): Promise<Server> {
  const port = String(await freePort());
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "bench/metrics/server.ts")], {
      cwd: ROOT,
      env: { ...process.env, PORT: port, LOG_LEVEL: "warn", METRICS_TOKEN: metricsOn ? TOKEN : "" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve({ child, url: `http://127.0.0.1:${port}` });
    });
    child.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
}

async function stop(server: Server): Promise<void> {
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.kill("SIGTERM");
  await exited;
}

type Result = Measure & { cpuUs: number };

async function cpu(server: Server): Promise<number> {
  return ((await (await fetch(`${server.url}/bench/cpu`)).json()) as { cpu_us: number }).cpu_us;
}

async function measure(server: Server, path: string, headers: Record<string, string>): Promise<Result> {
  const url = server.url + path;
  await autocannon({ url, connections: CONNECTIONS, duration: Math.min(1, WARMUP), headers });
  const before = await cpu(server);
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  const cpuUs = (await cpu(server)) - before;
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    cpuUs: cpuUs / r.requests.total,
  };
}

const ns = micro();
console.log(`Metrics.observe(): ${ns.toFixed(0)} ns per request`);
console.log(
  `load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);

const targets = [
  { name: "GET /health", path: "/health", headers: {} },
  { name: "GET /ready (1 database transaction)", path: "/ready", headers: {} },
];
const results = new Map<string, Result[]>();
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [false, true] : [true, false];
  for (const on of order) {
    const server = await start(on);
    try {
      for (const t of targets) {
        const m = await measure(server, t.path, t.headers);
        const key = `${t.name}|${on ? "on" : "off"}`;
        results.set(key, [...(results.get(key) ?? []), m]);
      }
      if (on) {
        const scrapes: number[] = [];
        for (let i = 0; i < 20; i++) {
          const t0 = performance.now();
          const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
          await res.text();
          scrapes.push(performance.now() - t0);
        }
        scrapes.sort((a, b) => a - b);
        console.log(
          `scrape (20, with the database's figures): p50 ${scrapes[10]?.toFixed(1)} ms, max ${scrapes[19]?.toFixed(1)} ms`,
        );
      }
    } finally {
      await stop(server);
    }
  }
}
console.log(
  `load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
console.log("| request | metrics | CPU µs per request (each round) | req/s | p50 ms | p99 ms | non-2xx |");
console.log("|---|---|---|---|---|---|---|");
for (const t of targets) {
  for (const on of ["off", "on"]) {
    const runs = results.get(`${t.name}|${on}`) ?? [];
    const m = average(runs);
    const cpus = runs.map((r) => r.cpuUs.toFixed(0)).join(", ");
    console.log(
      `| ${t.name} | ${on} | ${cpus} | ${m.rps.toFixed(0)} | ${m.p50.toFixed(1)} | ${m.p99.toFixed(1)} | ${m.errors} |`,
    );
  }
}
