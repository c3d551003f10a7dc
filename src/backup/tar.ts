import { createHash } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import type { Readable, Writable } from "node:stream";

/**
 * The backup's container: a POSIX ustar archive (what `tar -tzf` lists), written and read as a
 * stream, so a backup of any size holds one chunk in memory at a time. Only what backups need:
 * regular files, names up to 255 bytes (split into ustar's prefix and name), no links.
 */

const BLOCK = 512;

/** What was written for one entry: its size and SHA-256, for the manifest. */
export interface Written {
  path: string;
  bytes: number;
  sha256: string;
}

function octal(value: number, length: number): string {
  return `${value.toString(8).padStart(length - 1, "0")}\0`;
}

function header(name: string, size: number, mode: number, mtime: Date): Buffer {
  const block = Buffer.alloc(BLOCK);
  let prefix = "";
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    // ustar: the path split at a slash into a prefix (155 bytes) and a name (100 bytes).
    const cut = name.lastIndexOf("/", 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100) throw new Error(`path too long: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  block.write(base, 0, 100, "utf8");
  block.write(octal(mode & 0o7777, 8), 100, "ascii");
  block.write(octal(0, 8), 108, "ascii");
  block.write(octal(0, 8), 116, "ascii");
  block.write(octal(size, 12), 124, "ascii");
  block.write(octal(Math.floor(mtime.getTime() / 1000), 12), 136, "ascii");
  block.write("        ", 148, "ascii");
  block.write("0", 156, "ascii");
  block.write("ustar\u000000", 257, "ascii");
  block.write(prefix, 345, 155, "utf8");
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7), 148, "ascii");
  return block;
}

/** Writes a tar stream into `out`, waiting when it is full. */
export class TarWriter {
  private readonly out: Writable;
  /** Bytes written so far (before any compression downstream). */
  written = 0;

  constructor(out: Writable) {
    this.out = out;
  }

  private async push(chunk: Buffer): Promise<void> {
    this.written += chunk.length;
    if (!this.out.write(chunk)) await once(this.out, "drain");
  }

  /** One file from memory. */
  async addBuffer(name: string, data: Buffer | Uint8Array, mode = 0o644): Promise<Written> {
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    await this.push(header(name, bytes.length, mode, new Date()));
    // In slices, so a large buffer also waits for the stream.
    for (let at = 0; at < bytes.length; at += 1 << 20) await this.push(bytes.subarray(at, at + (1 << 20)));
    await this.pad(bytes.length);
    return { path: name, bytes: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") };
  }

  /** One file from disk, of the size it had when stat'ed (`size`): the backup's files are not written to meanwhile. */
  async addFile(
    name: string,
    file: string,
    size: number,
    mode = 0o644,
    onBytes?: (n: number) => void,
  ): Promise<Written> {
    await this.push(header(name, size, mode, new Date()));
    const hash = createHash("sha256");
    let seen = 0;
    for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
      const part = seen + chunk.length > size ? chunk.subarray(0, size - seen) : chunk;
      seen += part.length;
      hash.update(part);
      await this.push(part);
      onBytes?.(part.length);
      if (seen >= size) break;
    }
    if (seen !== size) throw new Error(`${file} changed while it was backed up (${seen} of ${size} bytes)`);
    await this.pad(size);
    return { path: name, bytes: size, sha256: hash.digest("hex") };
  }

  private async pad(size: number): Promise<void> {
    const rest = size % BLOCK;
    if (rest) await this.push(Buffer.alloc(BLOCK - rest));
  }

  /** The two zero blocks that end an archive. */
  async finish(): Promise<void> {
    await this.push(Buffer.alloc(2 * BLOCK));
  }
}

/** The archive is not a tar stream, or ends inside an entry. */
export class DamagedArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DamagedArchiveError";
  }
}

function field(block: Buffer, start: number, length: number): string {
  const raw = block.subarray(start, start + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString("utf8");
}

function parseOctal(block: Buffer, start: number, length: number): number {
  const text = field(block, start, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new DamagedArchiveError("a tar header has a malformed number");
  return text === "" ? 0 : Number.parseInt(text, 8);
}

/** One entry being read: its name and size; `save` writes its bytes to a file and returns their SHA-256. */
export interface Entry {
  name: string;
  size: number;
  type: string;
}

/**
 * Reads a tar stream, calling `onEntry` for each entry (type "0" a file, "5" a folder, …); it
 * returns where the entry's bytes go (a file), or null to skip them. `onHashed` gets each file's
 * SHA-256 once its bytes are read.
 */
export async function readTar(
  input: Readable,
  onEntry: (entry: Entry) => Promise<Writable | null> | Writable | null,
  onHashed: (entry: Entry, sha256: string) => void,
): Promise<void> {
  let buffer: Buffer = Buffer.alloc(0);
  let state: "header" | "data" | "pad" | "end" = "header";
  let entry: Entry | undefined;
  let left = 0;
  let padLeft = 0;
  let sink: Writable | null = null;
  let hash = createHash("sha256");
  const closeSink = async () => {
    if (!sink) return;
    const s = sink;
    sink = null;
    s.end();
    await once(s, "close");
  };
  for await (const chunk of input as AsyncIterable<Buffer>) {
    buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
    for (;;) {
      if (state === "end") break;
      if (state === "header") {
        if (buffer.length < BLOCK) break;
        const block = buffer.subarray(0, BLOCK);
        buffer = buffer.subarray(BLOCK);
        if (block.every((b) => b === 0)) {
          state = "end";
          break;
        }
        let sum = 0;
        for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (block[i] as number);
        if (sum !== parseOctal(block, 148, 8))
          throw new DamagedArchiveError("a tar header's checksum is wrong");
        const prefix = field(block, 345, 155);
        const name = prefix ? `${prefix}/${field(block, 0, 100)}` : field(block, 0, 100);
        const type = field(block, 156, 1) || "0";
        const size = parseOctal(block, 124, 12);
        entry = { name, size, type };
        sink = await onEntry(entry);
        hash = createHash("sha256");
        left = size;
        padLeft = size % BLOCK ? BLOCK - (size % BLOCK) : 0;
        state = "data";
      }
      if (state === "data") {
        if (left > 0) {
          if (buffer.length === 0) break;
          const part = buffer.subarray(0, Math.min(left, buffer.length));
          buffer = buffer.subarray(part.length);
          left -= part.length;
          hash.update(part);
          if (sink && !sink.write(part)) await once(sink, "drain");
          if (left > 0) break;
        }
        await closeSink();
        if (entry?.type === "0") onHashed(entry, hash.digest("hex"));
        state = "pad";
      }
      if (state === "pad") {
        const skip = Math.min(padLeft, buffer.length);
        buffer = buffer.subarray(skip);
        padLeft -= skip;
        if (padLeft > 0) break;
        state = "header";
      }
    }
  }
  await closeSink();
  if (state !== "end" && !(state === "header" && buffer.length === 0 && entry))
    throw new DamagedArchiveError("the archive ends in the middle of a file (truncated?)");
}

/** A file opened for an entry's bytes, created with `mode`; its directory exists. */
export function fileSink(file: string, mode: number): Writable {
  return createWriteStream(file, { flags: "wx", mode });
}
