// A 200 MB WAV through /storage/v1/upload/resumable (TUS, docs/storage.md) with tus-js-client in
// 6 MB chunks (bench/README.md, "bench/storage"):
//
// 1. Backline on the embedded database, in its own process: half the file, then the server is
//    stopped (SIGTERM) and another started on the same DATA_DIR, and the same upload URL resumed
//    to the end; the object downloaded back must be byte-identical (sha256).
// 2. The same file in one go, on Backline and (STORAGE_PEER=WORKDIR/peer.json) on the real Supabase
//    Storage server: the time and MB/s of each.
//
//   STORAGE_PEER=/tmp/storage-peer/peer.json node bench/storage/resumable.ts
//   BENCH_MB=20 for a smaller file.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import * as tus from "tus-js-client";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { wav } from "../../src/storage/samples.ts";
import { tenantKeys } from "../../src/tenancy/keys.ts";
import { SMOKE, startServer, stopServer } from "../support.ts";

process.env.BENCH_ACCOUNTS ??= "1";
const { seed } = await import("../rest/catalog.ts");

const MB = 1024 * 1024;
const SIZE_MB = Number(process.env.BENCH_MB ?? (SMOKE ? 20 : 200));
const CHUNK = 6 * MB;
// 16-bit stereo at 44.1 kHz: 176,400 bytes a second.
const FILE = wav({ seconds: Math.ceil((SIZE_MB * MB) / 176_400) });
const SHA = createHash("sha256").update(FILE).digest("hex");

interface Target {
  /** The storage API's root. */
  base: string;
  headers: Record<string, string>;
}

/**
 * The peer runs with NODE_ENV=production and answers https upload URLs (a gateway ends TLS in
 * front of it in Supabase); on loopback they are plain http.
 */
class LoopbackHttp extends tus.DefaultHttpStack {
  override createRequest(method: string, url: string) {
    return super.createRequest(method, url.replace(/^https:\/\/127\.0\.0\.1:/, "http://127.0.0.1:"));
  }
}

function send(
  t: Target,
  bucket: string,
  name: string,
  o: { uploadUrl?: string; stopAt?: number } = {},
): Promise<{ url: string; stopped: boolean }> {
  return new Promise((resolve, reject) => {
    let stopped = false;
    const upload: tus.Upload = new tus.Upload(FILE, {
      ...(o.uploadUrl ? { uploadUrl: o.uploadUrl } : { endpoint: `${t.base}/upload/resumable` }),
      chunkSize: CHUNK,
      httpStack: new LoopbackHttp({}),
      retryDelays: [0, 500, 2000],
      headers: { ...t.headers, "x-upsert": "true" },
      metadata: { bucketName: bucket, objectName: name, contentType: "audio/wav", cacheControl: "3600" },
      onProgress: (sent) => {
        if (o.stopAt !== undefined && sent >= o.stopAt && !stopped && upload.url) {
          stopped = true;
          void upload.abort().then(() => resolve({ url: upload.url as string, stopped }), reject);
        }
      },
      onError: reject,
      onSuccess: () => resolve({ url: upload.url as string, stopped: false }),
    });
    upload.start();
  });
}

async function checked(t: Target, bucket: string, name: string): Promise<void> {
  const res = await fetch(`${t.base}/object/authenticated/${bucket}/${name}`, { headers: t.headers });
  if (!res.ok) throw new Error(`download: ${res.status}`);
  const sha = createHash("sha256")
    .update(Buffer.from(await res.arrayBuffer()))
    .digest("hex");
  if (sha !== SHA) throw new Error(`${name}: the object is not the file sent (sha256 ${sha})`);
}

async function bucketOn(t: Target): Promise<string> {
  const bucket = `tus-${process.pid}-${Date.now()}`;
  const res = await fetch(`${t.base}/bucket`, {
    method: "POST",
    headers: { ...t.headers, "content-type": "application/json" },
    body: JSON.stringify({ name: bucket, id: bucket, public: false }),
  });
  if (!res.ok) throw new Error(`bucket: ${res.status} ${await res.text()}`);
  return bucket;
}

const mbps = (ms: number) => (FILE.length / MB / (ms / 1000)).toFixed(1);

async function main() {
  const lines = [
    `A ${(FILE.length / MB).toFixed(1)} MB WAV, 6 MB chunks, ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} at the start, Node ${process.versions.node}`,
    "",
  ];
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "backline-bench-tus-"));
  try {
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    let s: Awaited<ReturnType<typeof seed>>;
    try {
      await migrate(engine);
      s = await seed(engine);
    } finally {
      await engine.close();
    }
    const keys = await tenantKeys({ id: s.tenantId, jwt_secret: s.secret, created_at: s.createdAt });
    const headers = { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` };
    const env = { DATA_DIR: dataDir, DATABASE_URL: "" };
    let server = await startServer("backline", env);
    try {
      let t: Target = { base: `${server.url}/storage/v1`, headers };
      const bucket = await bucketOn(t);
      // 1. Across a restart.
      const started = performance.now();
      const half = await send(t, bucket, "restart.wav", { stopAt: FILE.length / 2 });
      const firstHalf = performance.now() - started;
      const restartAt = performance.now();
      await stopServer(server);
      server = await startServer("backline", env);
      const restart = performance.now() - restartAt;
      t = { base: `${server.url}/storage/v1`, headers };
      const moved = `${t.base}/upload/resumable/${half.url.split("/").pop()}`;
      const head = await fetch(moved, { method: "HEAD", headers: { ...headers, "tus-resumable": "1.0.0" } });
      const offset = Number(head.headers.get("upload-offset"));
      const rest = performance.now();
      await send(t, bucket, "restart.wav", { uploadUrl: moved });
      const secondHalf = performance.now() - rest;
      await checked(t, bucket, "restart.wav");
      lines.push(
        "Backline (embedded database), across a restart:",
        "",
        "| step | time |",
        "|---|---|",
        `| up to ${(offset / MB).toFixed(0)} MB, then abort | ${(firstHalf / 1000).toFixed(1)} s |`,
        `| server stopped, another started on the same DATA_DIR | ${(restart / 1000).toFixed(1)} s |`,
        `| HEAD: offset ${offset} (${((offset / FILE.length) * 100).toFixed(0)} %); the rest sent | ${(secondHalf / 1000).toFixed(1)} s |`,
        "| the object downloaded back: sha256 identical | yes |",
        "",
      );
      // 2. In one go.
      const whole = performance.now();
      await send(t, bucket, "whole.wav");
      const ms = performance.now() - whole;
      await checked(t, bucket, "whole.wav");
      lines.push(
        "| server | one upload | MB/s |",
        "|---|---|---|",
        `| Backline | ${(ms / 1000).toFixed(1)} s | ${mbps(ms)} |`,
      );
    } finally {
      await stopServer(server);
    }
    const peerFile = process.env.STORAGE_PEER;
    if (peerFile) {
      const p = JSON.parse(readFileSync(peerFile, "utf8")) as { url: string; serviceKey: string };
      const t: Target = {
        base: p.url.replace(/\/+$/, ""),
        headers: { apikey: p.serviceKey, authorization: `Bearer ${p.serviceKey}` },
      };
      const bucket = await bucketOn(t);
      const whole = performance.now();
      await send(t, bucket, "whole.wav");
      const ms = performance.now() - whole;
      await checked(t, bucket, "whole.wav");
      lines.push(`| Supabase Storage | ${(ms / 1000).toFixed(1)} s | ${mbps(ms)} |`);
    }
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
  lines.push(
    "",
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")} at the end`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
