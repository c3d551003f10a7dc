/**
 * Runs storage-js's own server tests (run.ts) against Backline and against the real Supabase
 * Storage server, one after the other, and prints the two results test by test
 * (docs/uploads.md, "storage-js's own tests"): a Markdown table of the tests, each test whose
 * results differ with the failure each side gave, then every request of a test whose answer
 * differs (HTTP status, the error body's statusCode, code, error or message, or a success's
 * fields; ./exchanges.ts).
 * Storage sends most errors with HTTP 400 and the real status only in the body, Backline with the
 * body's status (docs/uploads.md, "Errors"): requests that differ only so are counted, not listed.
 *
 *   STORAGE_JS_TESTS=<supabase-js>/packages/core/storage-js/test PEER_WORKDIR=<start.sh's WORKDIR> \
 *     [ENGINE=pglite|postgres] [DRIVER=local|s3] node scripts/storage-js-suite/compare.ts [--all]
 *
 * Without --all the table lists only the tests whose results differ. The peer must be running
 * (../shared/peers/supabase-storage/start.sh); ENGINE and DRIVER choose Backline's side.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Exchange } from "./exchanges.ts";
import type { TestResult } from "./reporter.ts";

const here = import.meta.dirname;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "storage-js-compare-"));

interface Run {
  results: Map<string, TestResult>;
  exchanges: Map<string, Exchange[]>;
}

function runSuite(target: "backline" | "peer"): Promise<Run> {
  const file = path.join(scratch, `${target}.jsonl`);
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [`--test-reporter=${path.join(here, "reporter.ts")}`, path.join(here, "run.ts")],
      { env: { ...process.env, TARGET: target, EXCHANGES: file }, stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
    });
    child.on("error", reject);
    child.on("close", () => {
      const results = new Map<string, TestResult>();
      for (const line of out.split("\n")) {
        if (!line.startsWith("{")) continue;
        const r = JSON.parse(line) as TestResult;
        results.set(r.name, r);
      }
      if (results.size === 0) return reject(new Error(`${target}: no test results (see the output above)`));
      const exchanges = new Map<string, Exchange[]>();
      for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        if (!line) continue;
        const e = JSON.parse(line) as Exchange;
        exchanges.set(e.test, [...(exchanges.get(e.test) ?? []), e]);
      }
      resolve({ results, exchanges });
    });
  });
}

const all = process.argv.includes("--all");
const b = await runSuite("backline");
const s = await runSuite("peer");
fs.rmSync(scratch, { recursive: true, force: true });
const [backline, storage] = [b.results, s.results];
const names = [...new Set([...backline.keys(), ...storage.keys()])];
const count = (m: Map<string, TestResult>, r: TestResult["result"]) =>
  [...m.values()].filter((x) => x.result === r).length;
const cell = (r: TestResult | undefined) => r?.result ?? "absent";
const cellText = (text: string) => text.replaceAll("|", "\\|");

console.log(`| Test | Backline | Storage |\n| --- | --- | --- |`);
const differ: string[] = [];
for (const name of names) {
  const [x, y] = [backline.get(name), storage.get(name)];
  if (cell(x) !== cell(y)) differ.push(name);
  if (all || cell(x) !== cell(y)) console.log(`| ${cellText(name)} | ${cell(x)} | ${cell(y)} |`);
}
console.log(
  `\n${names.length} tests. Backline: ${count(backline, "pass")} pass, ${count(backline, "fail")} fail, ` +
    `${count(backline, "skip")} skipped. Storage: ${count(storage, "pass")} pass, ` +
    `${count(storage, "fail")} fail, ${count(storage, "skip")} skipped. ${differ.length} differ.`,
);
for (const name of differ) {
  console.log(`\n${name}`);
  console.log(`  Backline: ${cell(backline.get(name))} ${backline.get(name)?.error ?? ""}`);
  console.log(`  Storage:  ${cell(storage.get(name))} ${storage.get(name)?.error ?? ""}`);
}

/** One answer as a line: `404 NoSuchKey not_found "Object not found"` (the body's status first). */
const answer = (e: Exchange | undefined) =>
  e === undefined
    ? "(no request)"
    : e.error
      ? `HTTP ${e.status}: ${String(e.error.statusCode)} ${String(e.error.code)} ${String(e.error.error)} ${JSON.stringify(e.error.message)}`
      : `HTTP ${e.status}${e.fields === undefined ? "" : ` {${e.fields}}`}`;
const sameBody = (x: Exchange, y: Exchange) =>
  JSON.stringify(x.error ?? null) === JSON.stringify(y.error ?? null) && x.fields === y.fields;
const statusOnly = new Set<string>();
const answers: string[] = [];
for (const name of new Set([...b.exchanges.keys(), ...s.exchanges.keys()])) {
  const [xs, ys] = [b.exchanges.get(name) ?? [], s.exchanges.get(name) ?? []];
  for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
    const [x, y] = [xs[i], ys[i]];
    if (x && y && x.status === y.status && sameBody(x, y)) continue;
    // Documented: Storage says 400 with the real status in the body, Backline that status (a
    // HEAD answer has no body to say it).
    if (
      x &&
      y &&
      sameBody(x, y) &&
      y.status === 400 &&
      (String(x.status) === String(x.error?.statusCode) || (x.method === "HEAD" && x.status >= 400))
    ) {
      statusOnly.add(`${x.method} ${x.path}: Backline ${answer(x)}, Storage HTTP 400`);
      continue;
    }
    const [rx, ry] = [x && `${x.method} ${x.path}`, y && `${y.method} ${y.path}`];
    const request = rx && ry && rx !== ry ? `${rx} (Storage: ${ry})` : (rx ?? ry);
    answers.push(`${name}\n  ${request}\n  Backline: ${answer(x)}\n  Storage:  ${answer(y)}`);
  }
}
console.log(`\nAnswers that differ: ${answers.length}.`);
for (const a of answers) console.log(`\n${a}`);
console.log(`\nAnswers that differ only by Storage's HTTP 400: ${statusOnly.size}.`);
for (const a of statusOnly) console.log(`  ${a}`);
