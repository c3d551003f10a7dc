/**
 * Runs storage-js's own server tests against /storage/v1 (docs/uploads.md, "storage-js's own
 * tests"): `storageFileApi.test.ts` from a checkout of supabase/supabase-js, unchanged but for its
 * settings, under the jest-compatible layer beside this file, against a Backline app on a test
 * database — the embedded one or PostgreSQL, local disk or S3 (an s3rver started here).
 *
 *   STORAGE_JS_TESTS=<supabase-js>/packages/core/storage-js/test \
 *     [ENGINE=pglite|postgres] [DRIVER=local|s3] node scripts/storage-js-suite/run.ts
 *
 * The settings changed: the URL and key (a Backline tenant's service-role key, also sent as
 * `apikey`, which Backline needs to find the tenant), the package `@supabase/storage-js` instead of
 * its source (two internal classes it checks instances of, and its internal fetch module, are not
 * reachable from the package), and the buckets its seed.sql makes, created through the API.
 */
import "./jest-shim.ts";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after } from "node:test";
import { startApp, tenantWithKeys } from "../../test/support/app.ts";
import { createTestDb } from "../../test/support/db.ts";

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

const t = await createTestDb(process.env.ENGINE === "postgres" ? "postgres" : "pglite");
let env: Record<string, string> = {};
let s3: { close(): Promise<void> } | undefined;
if (process.env.DRIVER === "s3") {
  const { startS3rver } = await import("../../test/support/s3rver.ts");
  const { CreateBucketCommand, S3Client } = await import("@aws-sdk/client-s3");
  const server = await startS3rver();
  s3 = server;
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
const unlimited = { max: 1_000_000, windowSeconds: 1 };
const { keys } = await tenantWithKeys(t, {
  settings: { rest_rate_limits: { tenant: unlimited, caller: unlimited } },
});
process.env.STORAGE_URL = `${app.url}/storage/v1`;
process.env.SERVICE_KEY = keys.service_role_key;
for (const id of ["bucket2", "bucket3", "bucket4", "bucket5", "bucket-move"]) {
  await fetch(`${app.url}/storage/v1/bucket`, {
    method: "POST",
    headers: {
      apikey: keys.service_role_key,
      authorization: `Bearer ${keys.service_role_key}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ id, public: false }),
  });
}
after(async () => {
  await app.close();
  await s3?.close();
  await t.close();
  fs.rmSync(work, { recursive: true, force: true });
});
await import(path.join(work, "test", "storageFileApi.test.ts"));
