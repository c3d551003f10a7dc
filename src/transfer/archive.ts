import { closeSync, createReadStream, mkdirSync, openSync, writeSync } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { crc32 } from "node:zlib";
import { Unzip, type UnzipFile, UnzipInflate } from "fflate";

/**
 * A transfer archive (docs/catalogue.md, "An archive of ERN messages"): a .zip of a previous
 * distributor's delivery — ERN messages with their audio and artwork in the folders the messages
 * name — unpacked into a private folder, which the import then reads as it reads a folder.
 *
 * An archive is untrusted input, so it is judged whole before a byte is written: its central
 * directory (read here, at the end of the file) must list at most `entries` entries, each at most
 * `entryBytes` and `ratio` times its compressed size, `totalBytes` together, with names that stay
 * inside the folder (no `..`, no absolute or drive paths) and no symbolic links. Then fflate
 * streams the entries out, and the bytes are counted and CRC-checked as they come: an entry that
 * holds more than its header said, or other bytes, stops the unpacking. Any refusal is an
 * ArchiveError, and the caller removes the folder: nothing of a bad archive is imported.
 */

export interface ArchiveLimits {
  /** Entries (files and folders) in the archive. */
  entries: number;
  /** Uncompressed bytes of all entries together. */
  totalBytes: number;
  /** Uncompressed bytes of one entry. */
  entryBytes: number;
  /**
   * Largest uncompressed/compressed ratio of an entry of at least `ratioFloorBytes`, and of all the
   * entries together once they unpack to that much (a zip bomb's mark).
   */
  ratio: number;
  ratioFloorBytes: number;
}

const MiB = 1024 * 1024;

export const ARCHIVE_LIMITS: ArchiveLimits = {
  entries: 10_000,
  totalBytes: 8 * 1024 * MiB,
  entryBytes: 2 * 1024 * MiB,
  ratio: 100,
  ratioFloorBytes: MiB,
};

export type ArchiveProblemCode =
  | "archive_corrupt"
  | "archive_unsupported"
  | "archive_too_many_entries"
  | "archive_too_large"
  | "archive_entry_too_large"
  | "archive_ratio"
  | "archive_unsafe_path";

export class ArchiveError extends Error {
  readonly code: ArchiveProblemCode;
  /** The entry at fault, when one is. */
  readonly entry: string | undefined;

  constructor(code: ArchiveProblemCode, message: string, entry?: string) {
    super(message);
    this.name = "ArchiveError";
    this.code = code;
    this.entry = entry;
  }
}

interface Entry {
  name: string;
  method: number;
  flags: number;
  crc: number;
  compressed: number;
  size: number;
  directory: boolean;
}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;

/** Reads and judges the central directory (every check but the bytes themselves). */
export async function readCentralDirectory(
  file: string,
  limits: ArchiveLimits = ARCHIVE_LIMITS,
): Promise<Entry[]> {
  const fh = await open(file, "r");
  try {
    const fileSize = (await fh.stat()).size;
    // The end record is in the last 22 bytes plus at most a 65,535-byte comment.
    const tailSize = Math.min(fileSize, 22 + 0xffff);
    const tail = Buffer.alloc(tailSize);
    await fh.read(tail, 0, tailSize, fileSize - tailSize);
    let at = -1;
    for (let i = tailSize - 22; i >= 0; i--) {
      if (tail.readUInt32LE(i) === EOCD) {
        at = i;
        break;
      }
    }
    if (at < 0)
      throw new ArchiveError(
        "archive_corrupt",
        "the file is not a zip archive (no end of central directory)",
      );
    const count = tail.readUInt16LE(at + 10);
    const cdSize = tail.readUInt32LE(at + 12);
    const cdOffset = tail.readUInt32LE(at + 16);
    if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
      throw new ArchiveError(
        "archive_unsupported",
        "a Zip64 archive (over 4 GiB or 65,535 entries) is not taken: split the delivery into smaller archives",
      );
    }
    if (count > limits.entries) {
      throw new ArchiveError(
        "archive_too_many_entries",
        `the archive has ${count} entries; a transfer archive holds at most ${limits.entries}`,
      );
    }
    if (cdOffset + cdSize > fileSize - tailSize + at) {
      throw new ArchiveError("archive_corrupt", "the archive's central directory lies outside the file");
    }
    const cd = Buffer.alloc(cdSize);
    await fh.read(cd, 0, cdSize, cdOffset);
    const entries: Entry[] = [];
    const seen = new Set<string>();
    let total = 0;
    let packed = 0;
    let p = 0;
    for (let i = 0; i < count; i++) {
      if (p + 46 > cdSize || cd.readUInt32LE(p) !== CENTRAL) {
        throw new ArchiveError("archive_corrupt", "the archive's central directory is damaged");
      }
      const madeBy = cd.readUInt16LE(p + 4) >> 8;
      const flags = cd.readUInt16LE(p + 8);
      const method = cd.readUInt16LE(p + 10);
      const crc = cd.readUInt32LE(p + 16);
      const compressed = cd.readUInt32LE(p + 20);
      const size = cd.readUInt32LE(p + 24);
      const nameLength = cd.readUInt16LE(p + 28);
      const extraLength = cd.readUInt16LE(p + 30);
      const commentLength = cd.readUInt16LE(p + 32);
      const external = cd.readUInt32LE(p + 38);
      if (p + 46 + nameLength > cdSize) {
        throw new ArchiveError("archive_corrupt", "the archive's central directory is damaged");
      }
      const raw = cd.subarray(p + 46, p + 46 + nameLength);
      // Bit 11: UTF-8 names; older tools wrote CP437, of which ASCII names are the same.
      const name = (flags & 0x800 ? raw.toString("utf8") : raw.toString("latin1")).replace(/\\/g, "/");
      p += 46 + nameLength + extraLength + commentLength;
      entries.push(judge({ name, madeBy, flags, method, crc, compressed, size, external }, limits, seen));
      total += size;
      packed += compressed;
      if (total > limits.totalBytes) {
        throw new ArchiveError(
          "archive_too_large",
          `the archive unpacks to more than ${limits.totalBytes} bytes, the most a transfer archive may hold`,
        );
      }
    }
    // The same mark over the whole archive: many small entries, each under the floor, expanding
    // together (a bomb of 1 MiB − 1 byte entries) are refused as one large one would be.
    if (total >= limits.ratioFloorBytes && total > limits.ratio * Math.max(packed, 1)) {
      throw new ArchiveError(
        "archive_ratio",
        `the archive's entries expand ${Math.round(total / Math.max(packed, 1))} times together ` +
          `(at most ${limits.ratio}): refused as a possible zip bomb`,
      );
    }
    return entries;
  } finally {
    await fh.close();
  }
}

function judge(
  e: {
    name: string;
    madeBy: number;
    flags: number;
    method: number;
    crc: number;
    compressed: number;
    size: number;
    external: number;
  },
  limits: ArchiveLimits,
  seen: Set<string>,
): Entry {
  const { name } = e;
  const parts = name.split("/");
  const unsafe =
    name.length === 0 ||
    name.startsWith("/") ||
    /^[A-Za-z]:/.test(name) ||
    name.includes("\0") ||
    parts.some((s) => s === ".." || s === ".");
  if (unsafe) {
    throw new ArchiveError(
      "archive_unsafe_path",
      `the entry ${JSON.stringify(name)} would be written outside the archive's folder`,
      name,
    );
  }
  // Unix (3) and macOS (19) tools keep the file's mode in the high half of the external attributes.
  const mode = e.madeBy === 3 || e.madeBy === 19 ? e.external >>> 16 : 0;
  if ((mode & 0o170000) === 0o120000) {
    throw new ArchiveError(
      "archive_unsafe_path",
      `the entry ${JSON.stringify(name)} is a symbolic link`,
      name,
    );
  }
  const key = name.replace(/\/$/, "").toLowerCase();
  if (seen.has(key)) {
    throw new ArchiveError(
      "archive_unsafe_path",
      `the entry ${JSON.stringify(name)} is in the archive twice`,
      name,
    );
  }
  seen.add(key);
  if (e.flags & 1) {
    throw new ArchiveError("archive_unsupported", `the entry ${JSON.stringify(name)} is encrypted`, name);
  }
  const directory = name.endsWith("/");
  if (!directory && e.method !== 0 && e.method !== 8) {
    throw new ArchiveError(
      "archive_unsupported",
      `the entry ${JSON.stringify(name)} is compressed with method ${e.method}; a transfer archive uses deflate or none`,
      name,
    );
  }
  if (e.size > limits.entryBytes) {
    throw new ArchiveError(
      "archive_entry_too_large",
      `the entry ${JSON.stringify(name)} is ${e.size} bytes; an entry may be at most ${limits.entryBytes}`,
      name,
    );
  }
  if (e.size >= limits.ratioFloorBytes && e.size > limits.ratio * Math.max(e.compressed, 1)) {
    throw new ArchiveError(
      "archive_ratio",
      `the entry ${JSON.stringify(name)} expands ${Math.round(e.size / Math.max(e.compressed, 1))} times ` +
        `(at most ${limits.ratio}): refused as a possible zip bomb`,
      name,
    );
  }
  return {
    name,
    method: e.method,
    flags: e.flags,
    crc: e.crc,
    compressed: e.compressed,
    size: e.size,
    directory,
  };
}

/**
 * Unpacks a judged archive into `into` (an empty private folder). Returns how many files it wrote.
 * Rejects with an ArchiveError; the caller removes `into` then.
 */
export async function unpackArchive(
  file: string,
  into: string,
  limits: ArchiveLimits = ARCHIVE_LIMITS,
): Promise<{ files: number; bytes: number }> {
  const entries = await readCentralDirectory(file, limits);
  const byName = new Map(entries.map((e) => [e.name, e]));
  const done = new Set<string>();
  let files = 0;
  let bytes = 0;
  let failure: unknown;
  const fail = (error: unknown) => {
    failure ??= error;
  };

  const unzip = new Unzip((f: UnzipFile) => {
    if (failure) return;
    const name = f.name.replace(/\\/g, "/");
    const entry = byName.get(name);
    if (!entry || done.has(name)) {
      fail(
        new ArchiveError(
          "archive_corrupt",
          `the entry ${JSON.stringify(name)} is not the one the archive's directory lists`,
          name,
        ),
      );
      return;
    }
    done.add(name);
    // macOS's Archive Utility adds each file's AppleDouble twin (`__MACOSX/…/._name`): not the
    // delivery's, and a `._message.xml` would read as a broken message.
    if (isMacMetadata(name)) return;
    const target = path.join(into, ...name.split("/"));
    if (entry.directory) {
      mkdirSync(target, { recursive: true });
      return;
    }
    mkdirSync(path.dirname(target), { recursive: true });
    const fd = openSync(target, "wx");
    let written = 0;
    let crc = 0;
    f.ondata = (error, chunk, final) => {
      if (failure) return;
      if (error) {
        closeSync(fd);
        fail(
          new ArchiveError(
            "archive_corrupt",
            `the entry ${JSON.stringify(name)} cannot be unpacked: ${error.message}`,
            name,
          ),
        );
        return;
      }
      written += chunk.length;
      if (written > entry.size) {
        closeSync(fd);
        f.terminate();
        fail(
          new ArchiveError(
            "archive_corrupt",
            `the entry ${JSON.stringify(name)} holds more than the ${entry.size} bytes its header says`,
            name,
          ),
        );
        return;
      }
      writeSync(fd, chunk);
      crc = crc32(chunk, crc);
      if (final) {
        closeSync(fd);
        if (written !== entry.size || crc !== entry.crc) {
          fail(
            new ArchiveError(
              "archive_corrupt",
              `the entry ${JSON.stringify(name)} is damaged (its bytes do not match the archive's CRC-32 and size)`,
              name,
            ),
          );
          return;
        }
        files++;
        bytes += written;
      }
    };
    try {
      f.start();
    } catch (error) {
      closeSync(fd);
      fail(
        new ArchiveError(
          "archive_unsupported",
          `the entry ${JSON.stringify(name)}: ${(error as Error).message}`,
          name,
        ),
      );
    }
  });
  unzip.register(UnzipInflate);

  try {
    for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024 })) {
      unzip.push(chunk as Buffer, false);
      if (failure) break;
    }
    if (!failure) unzip.push(new Uint8Array(0), true);
  } catch (error) {
    fail(new ArchiveError("archive_corrupt", `the archive cannot be unpacked: ${(error as Error).message}`));
  }
  if (failure) throw failure;
  const missing = entries.find((e) => !done.has(e.name));
  if (missing) {
    throw new ArchiveError(
      "archive_corrupt",
      `the entry ${JSON.stringify(missing.name)} that the archive's directory lists is not in the file`,
      missing.name,
    );
  }
  return { files, bytes };
}

const isMacMetadata = (name: string) =>
  name.startsWith("__MACOSX/") || (name.split("/").pop() ?? "").startsWith("._");

/** Whether a file is a zip archive: by its extension, else by its first bytes. */
export async function isZipArchive(file: string): Promise<boolean> {
  if (/\.zip$/i.test(file)) return true;
  const fh = await open(file, "r").catch(() => undefined);
  if (!fh) return false;
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await fh.read(head, 0, 4, 0);
    return bytesRead === 4 && head.readUInt32LE(0) === 0x04034b50;
  } finally {
    await fh.close();
  }
}
