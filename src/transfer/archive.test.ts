import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { zipSync } from "fflate";
import { ARCHIVE_LIMITS, ArchiveError, unpackArchive } from "./archive.ts";

/** The archive reader's limits, one by one: each refusal has its code and writes nothing it should not. */

const root = mkdtempSync(path.join(os.tmpdir(), "backline-archive-test-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function zipFile(entries: Parameters<typeof zipSync>[0]): string {
  const file = path.join(root, `a${++n}.zip`);
  writeFileSync(file, zipSync(entries));
  return file;
}

async function refused(file: string, code: string, limits = ARCHIVE_LIMITS): Promise<ArchiveError> {
  const into = mkdtempSync(path.join(root, "out-"));
  const error = await unpackArchive(file, into, limits).then(
    () => assert.fail(`${file} was unpacked`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ArchiveError, String(error));
  assert.equal(error.code, code, error.message);
  return error;
}

test("a good archive unpacks into its folders, bytes intact", async () => {
  const audio = randomBytes(300_000);
  const file = zipFile({
    "delivery/": {},
    "delivery/message.xml": new TextEncoder().encode("<x/>"),
    "delivery/resources/A1.wav": [audio, { level: 0 }],
  });
  const into = mkdtempSync(path.join(root, "out-"));
  assert.deepEqual(await unpackArchive(file, into), { files: 2, bytes: 4 + audio.length });
  assert.deepEqual(readFileSync(path.join(into, "delivery/resources/A1.wav")), audio);
  assert.equal(readFileSync(path.join(into, "delivery/message.xml"), "utf8"), "<x/>");
});

test("macOS's __MACOSX and ._ twins are left out", async () => {
  const file = zipFile({
    "delivery/._message.xml": new Uint8Array([0, 5, 22, 7]),
    "delivery/message.xml": new TextEncoder().encode("<x/>"),
    "__MACOSX/delivery/._message.xml": new Uint8Array([0, 5, 22, 7]),
    "delivery/A1.wav": [randomBytes(1000), { level: 0 }],
  });
  const into = mkdtempSync(path.join(root, "out-"));
  assert.deepEqual(await unpackArchive(file, into), { files: 2, bytes: 1004 });
  assert.deepEqual(readdirSync(into), ["delivery"]);
  assert.deepEqual(readdirSync(path.join(into, "delivery")).sort(), ["A1.wav", "message.xml"]);
});

test("zip-slip: a .. entry or an absolute path is refused before anything is written", async () => {
  const into = mkdtempSync(path.join(root, "out-"));
  const e = await refused(
    zipFile({ "ok.xml": new Uint8Array([1]), "../../evil.sh": new Uint8Array([1]) }),
    "archive_unsafe_path",
  );
  assert.equal(e.entry, "../../evil.sh");
  await refused(zipFile({ "/etc/evil": new Uint8Array([1]) }), "archive_unsafe_path");
  await refused(zipFile({ "a\\..\\..\\evil": new Uint8Array([1]) }), "archive_unsafe_path");
  assert.deepEqual(readdirSync(into), []);
});

test("a symbolic link entry is refused", async () => {
  const file = zipFile({
    "link.wav": [new TextEncoder().encode("/etc/passwd"), { os: 3, attrs: (0o120777 << 16) >>> 0 }],
  });
  const e = await refused(file, "archive_unsafe_path");
  assert.match(e.message, /symbolic link/);
});

test("a zip bomb (an entry expanding far more than audio does) is refused by its ratio", async () => {
  await refused(zipFile({ "silence.wav": [new Uint8Array(8 * 1024 * 1024), { level: 9 }] }), "archive_ratio");
});

test("many small entries expanding together are a zip bomb too (each under the per-entry floor)", async () => {
  const entries: Record<string, [Uint8Array, { level: 9 }]> = {};
  for (let i = 0; i < 40; i++) entries[`zeros-${i}.wav`] = [new Uint8Array(1024 * 1024 - 1), { level: 9 }];
  const e = await refused(zipFile(entries), "archive_ratio");
  assert.match(e.message, /together/);
  assert.equal(e.entry, undefined);
});

test("entry count, entry size and total size have their limits", async () => {
  const small = { ...ARCHIVE_LIMITS, entries: 2, entryBytes: 1000, totalBytes: 1500 };
  await refused(
    zipFile({ a: new Uint8Array(1), b: new Uint8Array(1), c: new Uint8Array(1) }),
    "archive_too_many_entries",
    small,
  );
  await refused(zipFile({ a: randomBytes(1001) }), "archive_entry_too_large", small);
  await refused(zipFile({ a: randomBytes(800), b: randomBytes(800) }), "archive_too_large", small);
});

test("a corrupt archive: not a zip, truncated, or bytes changed", async () => {
  const notZip = path.join(root, "not.zip");
  writeFileSync(notZip, "just text");
  await refused(notZip, "archive_corrupt");
  const good = readFileSync(zipFile({ "a.wav": [randomBytes(50_000), { level: 0 }] }));
  const truncated = path.join(root, "truncated.zip");
  writeFileSync(truncated, good.subarray(0, 30_000));
  await refused(truncated, "archive_corrupt");
  const flipped = Buffer.from(good);
  flipped[1000] = (flipped[1000] as number) ^ 0xff;
  const changed = path.join(root, "changed.zip");
  writeFileSync(changed, flipped);
  await refused(changed, "archive_corrupt");
});
