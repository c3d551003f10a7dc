/**
 * Sends the same 40 requests — every /storage/v1 route, with its usual mistakes — to Backline
 * (a test app, as run.ts starts it) and to the real Supabase Storage server (the peer of
 * ../shared/peers/supabase-storage), in the same order, and prints each answer that differs:
 * the HTTP status, and the error body's statusCode, code, error and message, or a success's
 * fields (docs/uploads.md, "storage-js's own tests", outside the suite).
 *
 *   PEER_WORKDIR=<start.sh's WORKDIR> [ENGINE=pglite|postgres] node scripts/storage-js-suite/probe.ts [--all]
 */
import fs from "node:fs";
import path from "node:path";
import { startApp, tenantWithKeys } from "../../test/support/app.ts";
import { createTestDb } from "../../test/support/db.ts";

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
const t = await createTestDb(process.env.ENGINE === "postgres" ? "postgres" : "pglite");
const app = await startApp(t, {});
const unlimited = { max: 1_000_000, windowSeconds: 1 };
const { keys } = await tenantWithKeys(t, {
  settings: { rest_rate_limits: { tenant: unlimited, caller: unlimited } },
});
const targets = [
  { name: "Backline", url: `${app.url}/storage/v1`, key: keys.service_role_key },
  { name: "Storage", url: peer.url, key: peer.serviceKey },
];

const b = `probe-${Date.now()}`;
const text = { "content-type": "text/plain" };
/** method, path, body (a string is sent as it is, anything else as JSON), headers */
type Probe = [string, string, unknown?, Record<string, string>?];
const probes: Probe[] = [
  ["POST", "/bucket", { id: b, name: b }],
  ["POST", "/bucket", { id: b, name: b }],
  ["POST", "/bucket", { id: "a/b", name: "a/b" }],
  ["POST", "/bucket", "{", { "content-type": "application/json" }],
  ["POST", "/bucket", { id: "x1", name: "x1", file_size_limit: "nope" }],
  ["GET", "/bucket/nope-bucket"],
  ["PUT", "/bucket/nope-bucket", { public: true }],
  ["DELETE", "/bucket/nope-bucket"],
  ["POST", `/object/${b}/a.txt`, "hello", text],
  ["POST", `/object/${b}/a.txt`, "hello", text],
  ["POST", `/object/${b}/b.txt`, "hello", text],
  ["PUT", `/object/${b}/nothing.txt`, "hello", text],
  ["POST", `/object/${b}/bad{key}.txt`, "x", text],
  ["DELETE", `/bucket/${b}`],
  ["POST", "/object/move", { bucketId: b, sourceKey: "a.txt", destinationKey: "b.txt" }],
  ["POST", "/object/copy", { bucketId: b, sourceKey: "a.txt", destinationKey: "b.txt" }],
  ["POST", "/object/move", { bucketId: b, sourceKey: "none.txt", destinationKey: "c.txt" }],
  ["POST", "/object/move", { bucketId: b, sourceKey: "a.txt" }],
  [
    "POST",
    "/object/copy",
    { bucketId: b, sourceKey: "a.txt", destinationKey: "c.txt", destinationBucket: "nope-bucket" },
  ],
  ["POST", `/object/sign/${b}/a.txt`, {}],
  ["POST", `/object/sign/${b}/a.txt`, { expiresIn: -1 }],
  ["POST", `/object/sign/${b}`, { expiresIn: 60 }],
  ["POST", `/object/sign/${b}`, { expiresIn: 60, paths: ["a.txt", "zz.txt"] }],
  ["GET", `/object/sign/${b}/a.txt`],
  ["GET", `/object/sign/${b}/a.txt?token=garbage`],
  ["POST", `/object/list/${b}`, {}],
  ["POST", "/object/list/nope-bucket", { prefix: "" }],
  ["POST", `/object/list/${b}`, { prefix: "", limit: "x" }],
  ["POST", `/object/list-v2/${b}`, { cursor: "garbage" }],
  ["DELETE", `/object/${b}`, {}],
  ["DELETE", `/object/${b}`, { prefixes: ["zz.txt"] }],
  ["DELETE", `/object/${b}/zz.txt`],
  ["GET", `/object/info/${b}/zz.txt`],
  ["GET", `/object/public/${b}/a.txt`],
  ["GET", `/object/authenticated/${b}/zz.txt`],
  ["POST", `/object/upload/sign/${b}/s.txt`],
  ["PUT", `/object/upload/sign/${b}/s.txt?token=garbage`, "x", text],
  ["PUT", `/object/upload/sign/${b}/s.txt`, "x", text],
  ["GET", "/nothing/here"],
  ["POST", `/bucket/${b}/empty`],
];

/** An answer in one line, the run's bucket name made neutral. */
async function answer(res: Response): Promise<string> {
  const body = await res.text();
  let shown = body.slice(0, 120);
  try {
    const json = JSON.parse(body) as unknown;
    const first = Array.isArray(json) ? json[0] : json;
    if (first && typeof first === "object") {
      const o = first as Record<string, unknown>;
      shown =
        !Array.isArray(json) && "statusCode" in o
          ? `${String(o.statusCode)} ${String(o.code)} ${String(o.error)} ${JSON.stringify(o.message)}`
          : `${Array.isArray(json) ? `[${json.length}] ` : ""}{${Object.keys(o).sort().join(",")}}`;
    } else if (Array.isArray(json)) shown = "[]";
  } catch {
    // not JSON: its first characters
  }
  return `HTTP ${res.status} ${shown}`.replaceAll(b, "<bucket>");
}

const answers = new Map<string, string[]>();
for (const target of targets) {
  const out: string[] = [];
  for (const [method, route, body, headers] of probes) {
    const h: Record<string, string> = {
      apikey: target.key,
      authorization: `Bearer ${target.key}`,
      ...headers,
    };
    let sent: string | undefined;
    if (typeof body === "string") sent = body;
    else if (body !== undefined) {
      sent = JSON.stringify(body);
      h["content-type"] ??= "application/json";
    }
    out.push(await answer(await fetch(target.url + route, { method, headers: h, body: sent })));
  }
  answers.set(target.name, out);
}
const all = process.argv.includes("--all");
const bodyOf = (a: string | undefined) => a?.replace(/^HTTP \d+ /, "");
let differ = 0;
let statusOnly = 0;
probes.forEach(([method, route], i) => {
  const [x, y] = [answers.get("Backline")?.[i], answers.get("Storage")?.[i]];
  if (x !== y) differ++;
  // Storage's 400 with the real status in the body (docs/uploads.md, "Errors"): counted, not listed.
  const onlyStatus = x !== y && bodyOf(x) === bodyOf(y) && y?.startsWith("HTTP 400 ");
  if (onlyStatus) statusOnly++;
  if (all || (x !== y && !onlyStatus)) {
    console.log(`${x === y ? "  " : "≠ "}${method} ${route.replaceAll(b, "<bucket>")}`);
    console.log(`    Backline: ${x}\n    Storage:  ${y}`);
  }
});
console.log(
  `\n${probes.length} requests: ${probes.length - differ} answers the same, ${statusOnly} differ only by ` +
    `Storage's HTTP 400, ${differ - statusOnly} differ otherwise.`,
);
await app.close();
await t.close();
