import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { ROOT, type RunningServer, startServer, tempDir } from "./support/process.ts";

/**
 * docs/public-api.md's quickstart, followed literally: its shell blocks run in order in one bash,
 * in a directory whose .backline/ is the server's DATA_DIR, against `npm start`'s server. Only the
 * port is changed (the doc says 54321). If the doc and the API drift apart, this fails.
 */

let server: RunningServer | undefined;
let dir: string;

before(async () => {
  dir = tempDir("backline-quickstart-");
  server = await startServer({ DATA_DIR: path.join(dir, ".backline") });
});

after(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

function quickstartBlocks(): string[] {
  const doc = fs.readFileSync(path.join(ROOT, "docs/public-api.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Quickstart"), doc.indexOf("## Authentication"));
  return [...section.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) =>
    (m[1] ?? "").replace(/^ {3}/gm, "").replace(/^npm install && npm start.*$/m, ""),
  );
}

test("the quickstart takes a fresh server from its dev key to a release live in the sandbox stores", () => {
  assert.ok(server);
  const port = new URL(server.url).port;
  const blocks = quickstartBlocks();
  assert.ok(blocks.length >= 6, `found ${blocks.length} shell blocks`);
  const script = [
    "set -euo pipefail",
    ...blocks.map((b) => b.replaceAll("54321", port)),
    // What the reader is told to expect, checked.
    `curl -s $BASE/releases/$RELEASE/status -H "Authorization: Bearer $KEY" > status.json`,
    `curl -s $BASE/releases/$RELEASE -H "Authorization: Bearer $KEY" > release.json`,
  ].join("\n");
  const output = execFileSync("bash", ["-c", script], { cwd: dir, encoding: "utf8", timeout: 60_000 });
  assert.match(output, /^QZES92600001\nsubmitted\nlive\n/m);
  const status = JSON.parse(fs.readFileSync(path.join(dir, "status.json"), "utf8"));
  assert.equal(status.status, "live");
  assert.equal(status.approval, "approved");
  assert.equal(status.live, true);
  assert.deepEqual(
    status.stores.map((s: { store: string; action: string; status: string }) => [
      s.store,
      s.action,
      s.status,
    ]),
    [
      ["apple_music", "insert", "live"],
      ["spotify", "insert", "live"],
    ],
  );
  const release = JSON.parse(fs.readFileSync(path.join(dir, "release.json"), "utf8"));
  assert.equal(release.tracks.length, 1);
  assert.equal(release.tracks[0].isrc, "QZES92600001");
  assert.equal(release.artists[0].name, "Luna Vale");
});
