/**
 * Runs storage-js's own server tests against /storage/v1 (docs/uploads.md, "storage-js's own
 * tests"): `storageFileApi.test.ts` from a checkout of supabase/supabase-js, unchanged but for its
 * settings, under the jest-compatible layer beside this file, against a Backline app on a test
 * database — the embedded one or PostgreSQL, local disk or S3 (an s3rver started here) — or
 * against the real Supabase Storage server started by ../shared/peers/supabase-storage/start.sh
 * (`TARGET=peer`, its work dir in PEER_WORKDIR), to compare the two (compare.ts).
 *
 *   STORAGE_JS_TESTS=<supabase-js>/packages/core/storage-js/test \
 *     [ENGINE=pglite|postgres] [DRIVER=local|s3] node scripts/storage-js-suite/run.ts
 *   STORAGE_JS_TESTS=… TARGET=peer PEER_WORKDIR=<start.sh's WORKDIR> node scripts/storage-js-suite/run.ts
 *
 * The settings changed: the URL and key (a Backline tenant's service-role key, also sent as
 * `apikey`, which Backline needs to find the tenant; the peer's URL, which has no /storage/v1
 * prefix, and its service key, from WORKDIR/peer.json), the package `@supabase/storage-js`
 * instead of its source (two internal classes it checks instances of, and its internal fetch
 * module, are not reachable from the package), and the buckets its seed.sql makes, created
 * through the API on either target (private, as seed.sql makes them; the peer keeps them between
 * runs, so "already exists" is expected there).
 */
import "./jest-shim.ts";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { recordExchanges } from "./exchanges.ts";

const source = process.env.STORAGE_JS_TESTS;
if (!source || !fs.existsSync(path.join(source, "storageFileApi.test.ts"))) {
  console.error("Set STORAGE_JS_TESTS to the test folder of storage-js (packages/core/storage-js/test).");
  process.exit(2);
}
const root = path.resolve(import.meta.dirname, "../..");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "backline-storage-js-"));
fs.symlinkSync(path.join(root, "node_modules"), path.join(work, "node_modules"));
fs.cpSync(path.join(source, "fixtures"), path.join(work, "test", "fixtures"), { recursive: true });

// The substitutions are text of the test file, `${…}` included.
// biome-ignore-start lint/suspicious/noTemplateCurlyInString: the test file's own template literals, as text
const settings: [RegExp | string, string][] = [
  [
    /import \{ SortByV2, StorageClient \} from '\.\.\/src\/index'/,
    "import { StorageClient } from '@supabase/storage-js'",
  ],
  ["from '../src/lib/common/errors'", "from '@supabase/storage-js'"],
  [
    /import (\w+DownloadBuilder) from '\.\.\/src\/packages\/\w+'/g,
    "class $1 {} // not exported by the package",
  ],
  [/const URL = '[^']*'/, "const URL = process.env.STORAGE_URL as string"],
  [/const KEY =\s*'[^']*'/, "const KEY = process.env.SERVICE_KEY as string"],
  [
    "new StorageClient(URL, { Authorization: `Bearer ${KEY}` })",
    "new StorageClient(URL, { Authorization: `Bearer ${KEY}`, apikey: KEY })",
  ],
  [/__dirname/g, "import.meta.dirname"],
  ["require('../src/lib/common/fetch')", "({} as Record<string, unknown>) // internal module"],
];
// biome-ignore-end lint/suspicious/noTemplateCurlyInString: the test file's own template literals, as text
let text = fs.readFileSync(path.join(source, "storageFileApi.test.ts"), "utf8");
for (const [from, to] of settings) text = text.replace(from, to);
fs.writeFileSync(path.join(work, "test", "storageFileApi.test.ts"), text);

const cleanups: (() => Promise<void>)[] = [];
let base: { url: string; key: string };
if (process.env.TARGET === "peer") {
  const dir = process.env.PEER_WORKDIR;
  if (!dir || !fs.existsSync(path.join(dir, "peer.json"))) {
    console.error(
      "Set PEER_WORKDIR to the work dir of a running storage peer (start.sh writes peer.json there).",
    );
    process.exit(2);
  }
  const peer = JSON.parse(fs.readFileSync(path.join(dir, "peer.json"), "utf8")) as {
    url: string;
    serviceKey: string;
  };
  base = { url: peer.url, key: peer.serviceKey };
} else {
  base = await startBackline(cleanups);
}
process.env.STORAGE_URL = base.url;
process.env.SERVICE_KEY = base.key;
for (const id of ["bucket2", "bucket3", "bucket4", "bucket5", "bucket-move"]) {
  const res = await fetch(`${base.url}/bucket`, {
    method: "POST",
    headers: { apikey: base.key, authorization: `Bearer ${base.key}`, "content-type": "application/json" },
    body: JSON.stringify({ id, name: id, public: false }),
  });
  const body = (await res.json()) as { statusCode?: string };
  if (!res.ok && body.statusCode !== "409") throw new Error(`creating ${id}: ${JSON.stringify(body)}`);
}
// The tests create `my-private-bucket` when they do not find it: the peer keeps it between runs,
// so it goes first, for both targets to start from the same state.
if (process.env.TARGET === "peer") await dropBucket(base, "my-private-bucket");
// EXCHANGES=<file>: every answer of the server during the tests, for compare.ts (./exchanges.ts).
if (process.env.EXCHANGES) recordExchanges(process.env.EXCHANGES, base.url);
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  fs.rmSync(work, { recursive: true, force: true });
});

/** Empties and deletes a bucket if it exists (the peer empties in the background: a few tries). */
async function dropBucket(target: { url: string; key: string }, id: string): Promise<void> {
  const call = (method: string, suffix = "") =>
    fetch(`${target.url}/bucket/${id}${suffix}`, {
      method,
      headers: { apikey: target.key, authorization: `Bearer ${target.key}` },
    }).then(async (res) => ({ ok: res.ok, body: (await res.json()) as { statusCode?: string } }));
  const emptied = await call("POST", "/empty");
  if (emptied.body.statusCode === "404") return;
  for (let attempt = 0; attempt < 20; attempt++) {
    if ((await call("DELETE")).ok) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`could not delete ${id} on the peer`);
}

/** A Backline app on a test database and a tenant with a service-role key; its /storage/v1. */
async function startBackline(cleanups: (() => Promise<void>)[]): Promise<{ url: string; key: string }> {
  const { startApp, tenantWithKeys } = await import("../../test/support/app.ts");
  const { createTestDb } = await import("../../test/support/db.ts");
  const t = await createTestDb(process.env.ENGINE === "postgres" ? "postgres" : "pglite");
  cleanups.push(() => t.close());
  let env: Record<string, string> = {};
  if (process.env.DRIVER === "s3") {
    const { startS3rver } = await import("../../test/support/s3rver.ts");
    const { CreateBucketCommand, S3Client } = await import("@aws-sdk/client-s3");
    const server = await startS3rver();
    cleanups.push(() => server.close());
    const client = new S3Client({
      endpoint: server.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    await client.send(new CreateBucketCommand({ Bucket: "objects" }));
    client.destroy();
    env = {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: server.endpoint,
      S3_BUCKET: "objects",
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
    };
  }
  const app = await startApp(t, env);
  cleanups.push(() => app.close());
  const unlimited = { max: 1_000_000, windowSeconds: 1 };
  const { keys } = await tenantWithKeys(t, {
    settings: { rest_rate_limits: { tenant: unlimited, caller: unlimited } },
  });
  return { url: `${app.url}/storage/v1`, key: keys.service_role_key };
}
await import(path.join(work, "test", "storageFileApi.test.ts"));
