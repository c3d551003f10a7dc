import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { DamagedArchiveError, readTar, TarWriter } from "./tar.ts";

const long = `storage/audio/${"a".repeat(36)}/${"b".repeat(36)}/${"c".repeat(36)}.wav`;

async function archive(): Promise<Buffer> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  const tar = new TarWriter(out);
  await tar.addBuffer("manifest.json", Buffer.from("{}\n"));
  await tar.addBuffer(long, Buffer.alloc(1000, 7));
  await tar.addBuffer("empty", Buffer.alloc(0));
  await tar.finish();
  out.end();
  return Buffer.concat(chunks);
}

test("a tar written here is read back whole, names past 100 bytes included, and `tar` lists it", async () => {
  const bytes = await archive();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-tar-"));
  fs.writeFileSync(path.join(dir, "a.tar"), bytes);
  const listed = execFileSync("tar", ["-tf", path.join(dir, "a.tar")], { encoding: "utf8" });
  assert.deepEqual(listed.trim().split("\n"), ["manifest.json", long, "empty"]);
  fs.rmSync(dir, { recursive: true, force: true });
  const seen: [string, number, string][] = [];
  const input = new PassThrough();
  // In odd-sized pieces, as a stream delivers them.
  for (let i = 0; i < bytes.length; i += 333) input.write(bytes.subarray(i, i + 333));
  input.end();
  await readTar(
    input,
    () => null,
    (e, sha) => seen.push([e.name, e.size, sha]),
  );
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
  assert.deepEqual(seen, [
    ["manifest.json", 3, sha(Buffer.from("{}\n"))],
    [long, 1000, sha(Buffer.alloc(1000, 7))],
    ["empty", 0, sha(Buffer.alloc(0))],
  ]);
});

test("a header with a wrong checksum, or an archive cut inside a file, is damaged", async () => {
  const bytes = await archive();
  const bad = Buffer.from(bytes);
  bad[0] = 0x41;
  const read = (b: Buffer) => {
    const input = new PassThrough();
    input.end(b);
    return readTar(
      input,
      () => null,
      () => {},
    );
  };
  await assert.rejects(
    read(bad),
    (e: unknown) => e instanceof DamagedArchiveError && /checksum/.test(e.message),
  );
  await assert.rejects(read(bytes.subarray(0, 1200)), /ends in the middle of a file/);
});
