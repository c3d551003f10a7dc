import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { ROOT, type RunningServer, startServer, tempDir } from "./support/process.ts";

/**
 * docs/public-api.md's quickstart, followed literally: its shell blocks run in order in one bash,
 * in a directory whose .backline/ is the server's DATA_DIR, against `npm start`'s server. Only the
 * port is changed (the doc says 54321), and `npx backline` runs this checkout's CLI. If the doc
 * and the API drift apart, this fails.
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
  return [...section.matchAll(/```bash(?: runnable)?\n([\s\S]*?)```/g)].map((m) =>
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
    ...blocks.map((b) =>
      b
        .replaceAll("54321", port)
        .replaceAll("npx backline", `"${process.execPath}" "${path.join(ROOT, "bin/backline.js")}"`),
    ),
    // What the reader is told to expect, checked.
    `curl -s $BASE/releases/$RELEASE/status -H "Authorization: Bearer $KEY" > status.json`,
    `curl -s $BASE/releases/$RELEASE -H "Authorization: Bearer $KEY" > release.json`,
  ].join("\n");
  const output = execFileSync("bash", ["-c", script], { cwd: dir, encoding: "utf8", timeout: 60_000 });
  assert.match(
    output,
    /^QZES92600001\n.*cover\.jpg.*\n.*track\.wav.*\nuploaded\nuploaded\nvalid\nvalid\nsubmitted\nlive\n/m,
  );
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

test("docs/uploads.md's curl examples work as written, after the quickstart's first three steps", () => {
  assert.ok(server);
  const port = new URL(server.url).port;
  const doc = fs.readFileSync(path.join(ROOT, "docs/uploads.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Try it with curl"), doc.indexOf("## The checks"));
  const uploads = [...section.matchAll(/```bash(?: runnable)?\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.ok(uploads.length >= 5, `found ${uploads.length} shell blocks`);
  const firstSteps = quickstartBlocks().filter((b) => !/artwork-upload-url|submit|status/.test(b));
  const cli = `"${process.execPath}" "${path.join(ROOT, "bin/backline.js")}"`;
  const script = ["set -euo pipefail", ...firstSteps, ...uploads]
    .map((b) => b.replaceAll("54321", port).replaceAll("npx backline", cli))
    .join("\n");
  const work = tempDir("backline-uploads-doc-");
  fs.symlinkSync(path.join(dir, ".backline"), path.join(work, ".backline"));
  try {
    const output = execFileSync("bash", ["-c", script], { cwd: work, encoding: "utf8", timeout: 60_000 });
    assert.match(output, /^PUT \{'content-type': 'image\/jpeg'\} 52428800$/m);
    assert.match(
      output,
      /^\{"Key":"artwork\/[0-9a-f-]{36}\/cover\.jpg","Id":"[0-9a-f-]{36}".*"status":"uploaded"/m,
    );
    assert.equal([...output.matchAll(/^[0-9a-f-]{36} valid$/gm)].length, 2, output);
    assert.match(output, /^invalid \['corrupt'\]$/m);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
});
