// /storage/v1 beside the real Supabase Storage server (bench/README.md, "bench/storage"): the same
// requests with the same client (autocannon) and the same service-role key on each side, one after
// another in one run:
//
//   upload 1 MB (POST, a new name each time), upload 50 MB, download 1 MB and 50 MB
//   (/object/authenticated), list 1,000 objects (POST /object/list), signed-URL download (1 MB)
//
// Backline runs in its own process (bench/rest/servers.ts) on PostgreSQL and on the embedded
// database; the peer is the server ../shared/peers/supabase-storage/start.sh started (its
// WORKDIR/peer.json in STORAGE_PEER; without it Backline is measured alone). Files on local disk on
// both sides.
//
//   STORAGE_PEER=/tmp/storage-peer/peer.json node bench/storage/run.ts [postgres|pglite ...]
//
// BENCH_STORAGE_ONLY="upload 1 MB,list" measures only the requests whose names start so;
// BENCH_SERVER_NODE_OPTIONS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") is Backline's NODE_OPTIONS.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine } from "../../src/db/types.ts";
import { tenantKeys } from "../../src/tenancy/keys.ts";
import {
  ADMIN_URL,
  CONNECTIONS,
  cpuSecondsOf,
  DURATION,
  postgresCpuSeconds,
  type Server,
  SMOKE,
  startServer,
  stopServer,
  WARMUP,
  withDatabase,
} from "../support.ts";

process.env.BENCH_ACCOUNTS ??= "1";
const { seed } = await import("../rest/catalog.ts");

const MB = 1024 * 1024;
const BIG = SMOKE ? 2 * MB : 50 * MB;
const LISTED = SMOKE ? 50 : 1000;
const ONE = randomBytes(MB);
const FIFTY = randomBytes(BIG);

interface Side {
  name: string;
  /** The storage API's root (Backline: /storage/v1; the peer: its bare paths). */
  base: string;
  headers: Record<string, string>;
  /** The server's process, for its CPU time. */
  pid?: number;
  /** Its database on the local PostgreSQL, for its backends' CPU time. */
  database?: string;
}

interface Figure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  cpuMs?: number;
  /** CPU ms per request of the PostgreSQL backends of the side's database. */
  dbCpuMs?: number;
}

const ONLY = (process.env.BENCH_STORAGE_ONLY ?? "")
  .split(",")
  .map((w) => w.trim())
  .filter(Boolean);
const SERVER_NODE_OPTIONS = process.env.BENCH_SERVER_NODE_OPTIONS;

/** CPU seconds the backends used between two readings (per backend: one that opened counts whole). */
function backendsBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0);
  return total;
}

async function call(side: Side, method: string, p: string, body?: unknown, type = "application/json") {
  const res = await fetch(`${side.base}${p}`, {
    method,
    headers: { ...side.headers, ...(body === undefined ? {} : { "content-type": type }) },
    ...(body === undefined
      ? {}
      : { body: Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${side.name} ${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
  return text ? (JSON.parse(text.startsWith("{") || text.startsWith("[") ? text : "null") as unknown) : null;
}

/** The bucket and the objects the reads need, made through the API itself. */
async function prepare(side: Side): Promise<string> {
  const bucket = `bench-${process.pid}-${Date.now()}`;
  await call(side, "POST", "/bucket", { name: bucket, id: bucket, public: false });
  await call(side, "POST", `/object/${bucket}/one.bin`, ONE, "application/octet-stream");
  await call(side, "POST", `/object/${bucket}/big.bin`, FIFTY, "application/octet-stream");
  for (let i = 0; i < LISTED; i += 5) {
    await Promise.all(
      Array.from({ length: Math.min(5, LISTED - i) }, (_, k) =>
        call(
          side,
          "POST",
          `/object/${bucket}/list/o-${String(i + k).padStart(5, "0")}.txt`,
          Buffer.from("x"),
          "text/plain",
        ),
      ),
    );
  }
  const listed = (await call(side, "POST", `/object/list/${bucket}`, {
    prefix: "list",
    limit: 1000,
  })) as unknown[];
  if (listed.length !== LISTED) throw new Error(`${side.name}: listed ${listed.length}, not ${LISTED}`);
  return bucket;
}

async function measure(
  side: Side,
  o: {
    duration?: number;
    method: string;
    path: (n: number) => string;
    body?: Buffer | string;
    type?: string;
    connections?: number;
  },
): Promise<Figure> {
  let n = 0;
  const url = new URL(side.base);
  const run = (duration: number) =>
    autocannon({
      url: url.origin,
      connections: o.connections ?? CONNECTIONS,
      duration,
      timeout: 120,
      requests: [
        {
          method: o.method as "GET",
          headers: { ...side.headers, ...(o.type ? { "content-type": o.type } : {}) },
          ...(o.body !== undefined ? { body: o.body } : {}),
          setupRequest: (req) => ({ ...req, path: `${url.pathname.replace(/\/$/, "")}${o.path(n++)}` }),
        },
      ],
    });
  await run(WARMUP);
  const before = side.pid ? cpuSecondsOf(side.pid) : 0;
  const dbBefore = side.database ? postgresCpuSeconds(side.database) : undefined;
  const r = await run(o.duration ?? DURATION);
  const total = r.requests.total;
  const dbSeconds =
    side.database && dbBefore ? backendsBetween(dbBefore, postgresCpuSeconds(side.database)) : undefined;
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    ...(side.pid && total > 0 ? { cpuMs: ((cpuSecondsOf(side.pid) - before) * 1000) / total } : {}),
    ...(dbSeconds !== undefined && total > 0 ? { dbCpuMs: (dbSeconds * 1000) / total } : {}),
  };
}

/** The requests measured, for a side whose bucket `prepare` made. */
async function kinds(side: Side): Promise<{ name: string; spec: Parameters<typeof measure>[1] }[]> {
  const bucket = await prepare(side);
  const signed = (await call(side, "POST", `/object/sign/${bucket}/one.bin`, { expiresIn: 3600 })) as {
    signedURL: string;
  };
  // Backline answers the path under /storage/v1; the peer's carries it only behind Supabase's gateway.
  const signedPath = signed.signedURL.replace(/^\/storage\/v1/, "");
  const tag = `${Date.now()}`;
  // 50 MB takes seconds per request on a loaded machine: 2 connections, at least 20 s (not at smoke size).
  const big = { connections: 2, duration: SMOKE ? DURATION : Math.max(DURATION, 20) };
  return [
    {
      name: "upload 1 MB",
      spec: {
        method: "POST",
        path: (n) => `/object/${bucket}/up/${tag}-${n}.bin`,
        body: ONE,
        type: "application/octet-stream",
      },
    },
    {
      name: `upload ${BIG / MB} MB`,
      spec: {
        method: "POST",
        path: (n) => `/object/${bucket}/up/${tag}-big-${n}.bin`,
        body: FIFTY,
        type: "application/octet-stream",
        ...big,
      },
    },
    { name: "download 1 MB", spec: { method: "GET", path: () => `/object/authenticated/${bucket}/one.bin` } },
    {
      name: `download ${BIG / MB} MB`,
      spec: { method: "GET", path: () => `/object/authenticated/${bucket}/big.bin`, ...big },
    },
    {
      name: `list ${LISTED}`,
      spec: {
        method: "POST",
        path: () => `/object/list/${bucket}`,
        body: JSON.stringify({ prefix: "list", limit: 1000 }),
        type: "application/json",
      },
    },
    { name: "signed-URL download 1 MB", spec: { method: "GET", path: () => signedPath } },
  ];
}

/** Each request on Backline and on the peer back to back (the order alternating), so both see the same load. */
async function figures(
  backline: Side,
  peer: Side | undefined,
): Promise<{ backline: Map<string, Figure>; peer: Map<string, Figure> | undefined }> {
  const wanted = (k: { name: string }) => ONLY.length === 0 || ONLY.some((w) => k.name.startsWith(w));
  const b = (await kinds(backline)).filter(wanted);
  const p = peer ? (await kinds(peer)).filter(wanted) : undefined;
  const out = { backline: new Map<string, Figure>(), peer: p ? new Map<string, Figure>() : undefined };
  for (const [i, k] of b.entries()) {
    const theirs = p?.[i];
    if (peer && theirs && i % 2 === 1) out.peer?.set(k.name, await measure(peer, theirs.spec));
    out.backline.set(k.name, await measure(backline, k.spec));
    if (peer && theirs && i % 2 === 0) out.peer?.set(k.name, await measure(peer, theirs.spec));
  }
  return out;
}

function table(title: string, backline: Map<string, Figure>, peer: Map<string, Figure> | undefined): string {
  const f = (v: number | undefined, d = 1) => (v === undefined ? "?" : v.toFixed(d));
  // The embedded database runs inside Backline's process: its CPU is in the process's column.
  const db = (x: Figure) => (x.dbCpuMs === undefined ? "–" : x.dbCpuMs.toFixed(2));
  const lines = [
    title,
    "",
    peer
      ? "| request | Backline req/s | Storage req/s | ratio | Backline p50 / p99 ms | Storage p50 / p99 ms | p99 ratio | CPU ms per request (Backline / Storage) | PostgreSQL backends' CPU ms per request (Backline / Storage) | errors |"
      : "| request | Backline req/s | p50 / p99 ms | CPU ms per request | PostgreSQL backends' CPU ms per request | errors |",
    peer ? "|---|---|---|---|---|---|---|---|---|---|" : "|---|---|---|---|---|---|",
  ];
  for (const [what, b] of backline) {
    const s = peer?.get(what);
    lines.push(
      s
        ? `| ${what} | ${f(b.rps)} | ${f(s.rps)} | ${(b.rps / s.rps).toFixed(2)}x | ${f(b.p50)} / ${f(b.p99)} | ${f(s.p50)} / ${f(s.p99)} | ${(b.p99 / Math.max(s.p99, 1)).toFixed(2)}x | ${f(b.cpuMs, 2)} / ${f(s.cpuMs, 2)} | ${db(b)} / ${db(s)} | ${b.errors} / ${s.errors} |`
        : `| ${what} | ${f(b.rps)} | ${f(b.p50)} / ${f(b.p99)} | ${f(b.cpuMs, 2)} | ${db(b)} | ${b.errors} |`,
    );
  }
  return lines.join("\n");
}

async function backlineSide(server: Server, engine: Engine, database: string): Promise<Side> {
  const s = await seed(engine);
  const keys = await tenantKeys({ id: s.tenantId, jwt_secret: s.secret, created_at: s.createdAt });
  return {
    name: "Backline",
    base: `${server.url}/storage/v1`,
    headers: { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` },
    ...(server.child.pid ? { pid: server.child.pid } : {}),
    database,
  };
}

/** Backline's NODE_OPTIONS for a profile (BENCH_SERVER_NODE_OPTIONS), else nothing added. */
const serverNodeOptions = (): Record<string, string> =>
  SERVER_NODE_OPTIONS ? { NODE_OPTIONS: SERVER_NODE_OPTIONS } : {};

async function onPostgres(peer: Side | undefined): Promise<string> {
  const dbName = `backline_bench_storage_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "backline-bench-storage-"));
  const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
  try {
    await migrate(owner);
    const server = await startServer("backline", {
      DATABASE_URL: withDatabase(ADMIN_URL, dbName, "authenticator"),
      DATABASE_POOL_SIZE: "10",
      DATA_DIR: dataDir,
      ...serverNodeOptions(),
    });
    try {
      const side = await backlineSide(server, owner, dbName);
      const f = await figures(side, peer);
      return table("Backline on PostgreSQL", f.backline, f.peer);
    } finally {
      await stopServer(server);
    }
  } finally {
    await owner.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

async function onPglite(peer: Side | undefined): Promise<string> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "backline-bench-storage-pglite-"));
  try {
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    let keysOf: Awaited<ReturnType<typeof seed>>;
    try {
      await migrate(engine);
      keysOf = await seed(engine);
    } finally {
      await engine.close();
    }
    const server = await startServer("backline", {
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      ...serverNodeOptions(),
    });
    try {
      const keys = await tenantKeys({
        id: keysOf.tenantId,
        jwt_secret: keysOf.secret,
        created_at: keysOf.createdAt,
      });
      const side: Side = {
        name: "Backline",
        base: `${server.url}/storage/v1`,
        headers: { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` },
        ...(server.child.pid ? { pid: server.child.pid } : {}),
      };
      const f = await figures(side, peer);
      return table("Backline on the embedded database (PGlite)", f.backline, f.peer);
    } finally {
      await stopServer(server);
    }
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  const wanted = process.argv.slice(2);
  const engines = wanted.length ? wanted : ["postgres", "pglite"];
  let peer: Side | undefined;
  const peerFile = process.env.STORAGE_PEER;
  const out: string[] = [
    `${CONNECTIONS} connections (2 for ${BIG / MB} MB, for at least 20 s), ${DURATION} s after ${WARMUP} s of warm-up, ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} at the start, Node ${process.versions.node}`,
  ];
  if (peerFile) {
    const p = JSON.parse(readFileSync(peerFile, "utf8")) as {
      url: string;
      serviceKey: string;
      pid?: number;
      database?: string;
    };
    const pid = p.pid;
    peer = {
      name: "Supabase Storage",
      base: p.url.replace(/\/+$/, ""),
      headers: { apikey: p.serviceKey, authorization: `Bearer ${p.serviceKey}` },
      ...(pid ? { pid } : {}),
      ...(p.database ? { database: p.database } : {}),
    };
  }
  for (const engine of engines) {
    out.push("", engine === "pglite" ? await onPglite(peer) : await onPostgres(peer));
  }
  out.push(
    "",
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} at the end`,
  );
  process.stdout.write(`${out.join("\n")}\n`);
}

await main();
