import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { test } from "node:test";
import { copyMigratedDatabase } from "./support/db.ts";
import { wavStream } from "./support/media-fixtures.ts";
import { freePort, type RunningServer, startServer, tempDir } from "./support/process.ts";
import { completeRelease, expectStatus, publicApi } from "./support/public-api.ts";

/**
 * A 500 MB upload to the real server (`npm start`'s entry, a child process, local-disk storage,
 * the embedded database) while its memory is sampled: the body streams to disk, so the server's
 * resident set stays within a bound however large the file is. The worker in the same process
 * then judges the file and gives the track its duration.
 */

type Obj = Record<string, unknown>;

const MB = 1024 * 1024;
const SIZE = 500 * MB;
/** How much the server's RSS may grow over its baseline while the upload runs. */
const RSS_BUDGET = 150 * MB;

/** Resident set size in bytes of a process (VmRSS in /proc/<pid>/status), or undefined once it is gone. */
function rssOf(pid: number): number | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** The process and its descendants (none expected: the server runs in one process). */
function processTree(pid: number): number[] {
  const children: number[] = [];
  try {
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      const list = fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
      for (const child of list.split(/\s+/).filter(Boolean)) children.push(...processTree(Number(child)));
    }
  } catch {
    // gone meanwhile
  }
  return [pid, ...children];
}

const treeRss = (pid: number) => processTree(pid).reduce((sum, p) => sum + (rssOf(p) ?? 0), 0);
const mb = (bytes: number) => (bytes / MB).toFixed(1);

test("a 500 MB audio upload streams to disk while the server's memory stays bounded", {
  timeout: 240_000,
}, async () => {
  const dataDir = tempDir("backline-large-upload-");
  let server: RunningServer | undefined;
  try {
    // Migrated beforehand: this test is about the upload, not about a first start.
    await copyMigratedDatabase(dataDir);
    const port = await freePort();
    server = await startServer({
      DATA_DIR: dataDir,
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: "warn",
    });
    const pid = server.child.pid;
    assert.ok(pid, "the server runs as a child process");
    const dev = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8")) as {
      api_key: string;
    };
    const api = publicApi(server.url, dev.api_key);

    const release = expectStatus(await api("POST", "/releases", completeRelease()), 201) as Obj & {
      id: string;
    };
    const track = expectStatus(
      await api("POST", `/releases/${release.id}/tracks`, {
        title: "Long Form",
        isrc: "QZLRG2600001",
        track_number: 1,
      }),
      201,
    ) as Obj & { id: string };
    const target = expectStatus(
      await api("POST", `/releases/${release.id}/tracks/${track.id}/audio-upload-url`, {
        filename: "long.wav",
        size: SIZE,
      }),
      201,
    ) as Obj & { asset_id: string; upload_url: string; method: string; headers: Record<string, string> };
    assert.ok(Number(target.max_bytes) >= SIZE, `the limit takes 500 MB: ${String(target.max_bytes)}`);

    // Baseline: the server settled after its first requests.
    await new Promise((r) => setTimeout(r, 1000));
    const settle: number[] = [];
    for (let i = 0; i < 5; i++) {
      settle.push(treeRss(pid));
      await new Promise((r) => setTimeout(r, 100));
    }
    const baseline = Math.min(...settle);
    const sampled = processTree(pid);

    let peak = baseline;
    let samples = 0;
    const sampler = setInterval(() => {
      const rss = treeRss(pid);
      samples++;
      if (rss > peak) peak = rss;
    }, 100);

    const hash = createHash("sha256");
    let sent = 0;
    const counted = wavStream(SIZE).pipe(
      new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          sent += chunk.length;
          done(null, chunk);
        },
      }),
    );
    const started = performance.now();
    let status: number;
    let answer: Obj;
    try {
      const res = await fetch(target.upload_url, {
        method: target.method,
        headers: target.headers,
        body: Readable.toWeb(counted) as ReadableStream<Uint8Array>,
        duplex: "half",
      } as RequestInit);
      status = res.status;
      answer = (await res.json()) as Obj;
    } finally {
      clearInterval(sampler);
    }
    const seconds = (performance.now() - started) / 1000;
    const digest = hash.digest("hex");

    console.log(
      `# server pid ${pid}: ${fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()} (${sampled.length} process(es) sampled)`,
    );
    console.log(`# RSS baseline ${mb(baseline)} MB, peak ${mb(peak)} MB (+${mb(peak - baseline)} MB)`);
    console.log(
      `# ${mb(sent)} MB uploaded in ${seconds.toFixed(1)} s (${(sent / MB / seconds).toFixed(1)} MB/s), ${samples} samples`,
    );

    assert.equal(status, 200, JSON.stringify(answer));
    assert.ok(sent > SIZE - 4 && sent <= SIZE, `sent ${sent}`);
    assert.equal(answer.bytes, sent);
    assert.equal(answer.sha256, digest);
    assert.ok(samples >= 5, `RSS sampled during the upload (${samples} samples)`);
    assert.ok(
      peak < baseline + RSS_BUDGET,
      `peak RSS ${mb(peak)} MB is not within ${mb(RSS_BUDGET)} MB of the baseline ${mb(baseline)} MB`,
    );

    // Under the account the key acts for: a test-mode key's sandbox twin of dev.account_id.
    const audioRoot = path.join(dataDir, "storage", "audio");
    const owners = fs
      .readdirSync(audioRoot)
      .filter((account) => fs.existsSync(path.join(audioRoot, account, release.id, `${track.id}.wav`)));
    assert.equal(owners.length, 1, `one file for the track: ${owners.join(", ")}`);
    const file = path.join(audioRoot, owners[0] as string, release.id, `${track.id}.wav`);
    assert.equal(fs.statSync(file).size, sent);
    const onDisk = createHash("sha256");
    for await (const chunk of fs.createReadStream(file)) onDisk.update(chunk as Buffer);
    assert.equal(onDisk.digest("hex"), digest, "the bytes on disk are the bytes sent");

    // The worker in the server's process judges it; the duration is the data's length in frames.
    const deadline = Date.now() + 120_000;
    let asset: Obj;
    for (;;) {
      asset = expectStatus(await api("GET", `/uploads/${target.asset_id}`), 200);
      if (asset.status === "valid" || asset.status === "invalid") break;
      if (Date.now() > deadline) assert.fail(`upload still ${String(asset.status)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(asset.status, "valid", JSON.stringify(asset.problems));
    const expected = SIZE / (44_100 * 2 * 2);
    const measured = Number((asset.metadata as Obj).duration_seconds);
    assert.ok(Math.abs(measured - expected) < 0.01, `duration ${measured} s, expected ≈ ${expected} s`);
    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    const [one] = detail.tracks as [Obj];
    assert.equal(one.duration, Math.round(expected));
    console.log(`# judged valid: ${measured} s; RSS after the checks ${mb(treeRss(pid))} MB`);
  } finally {
    if (server) {
      const code = await server.stop();
      if (code !== 0) console.log(`# server exited with ${code}:\n${server.output()}`);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
