import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { type Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type {
  DownloadOptions,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  UploadRequest,
  UploadTarget,
} from "./driver.ts";
import { storagePathOf } from "./keys.ts";
import type { TokenSigner } from "./tokens.ts";

/** The upload was larger than its grant allows; nothing was kept. */
export class TooLargeError extends Error {
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    super(`The upload is larger than the ${maxBytes} bytes this URL takes.`);
    this.name = "TooLargeError";
    this.maxBytes = maxBytes;
  }
}

/** Bytes that have arrived in a temporary file, not yet in place. */
export interface Received {
  bytes: number;
  sha256: string;
  /** Moves the file into place (atomically, after fsync). */
  commit(): Promise<void>;
  /** Drops it. */
  discard(): Promise<void>;
}

const KEY = /^(artwork|audio)\/[0-9a-f-]{36}\/[0-9a-f-]{36}\/(cover|[0-9a-f-]{36})\.(jpg|png|wav|flac)$/;
/** The bytes of an object of a tenant's own bucket (/storage/v1): `objects/<tenant>/<object id>`. */
const OBJECT_KEY = /^objects\/[0-9a-f-]{36}\/[0-9a-f-]{36}$/;

/**
 * Local-disk storage (the default): objects are files under DATA_DIR/storage, at their keys. The
 * upload URLs point at Backline's own upload route (src/storage/routes.ts) with a signed token;
 * the route streams the body to a temporary file beside the objects, counting bytes, and renames
 * it into place once it is complete and synced.
 */
export class LocalStore implements ObjectStore {
  readonly kind = "local" as const;
  readonly root: string;
  private readonly storageUrl: string;
  private readonly signer: TokenSigner;
  /** The temporary files' directory, made by the first upload (not asked again on each). */
  private uploadsDir: Promise<string> | undefined;

  constructor(options: { root: string; publicUrl: string; signer: TokenSigner }) {
    this.root = path.resolve(options.root);
    this.storageUrl = `${options.publicUrl.replace(/\/+$/, "")}/storage/v1`;
    this.signer = options.signer;
  }

  /** The file of a key; refuses anything that is not a key Backline makes. */
  file(key: string): string {
    if (!KEY.test(key) && !OBJECT_KEY.test(key)) throw new Error(`not a media object key: ${key}`);
    const file = path.resolve(this.root, key);
    if (!file.startsWith(this.root + path.sep)) throw new Error("object keys stay inside the storage root");
    return file;
  }

  async uploadTarget(request: UploadRequest): Promise<UploadTarget> {
    const token = this.signer.sign({
      use: "upload",
      asset: request.assetId,
      account: request.accountId,
      key: request.key,
      max: request.maxBytes,
      type: request.contentType,
      exp: Math.floor(request.expiresAt.getTime() / 1000),
    });
    return {
      url: `${this.storageUrl}/object/upload/sign/${storagePathOf(request.key)}?token=${token}`,
      method: "PUT",
      headers: { "content-type": request.contentType },
    };
  }

  /** Backline's signed route; the token names the asset, so the URL serves that version only. */
  async downloadUrl(key: string, expiresAt: Date, options: DownloadOptions = {}): Promise<string> {
    this.file(key);
    if (!options.assetId) throw new Error("a local download URL is signed for one asset");
    const token = this.signer.sign({
      use: "download",
      key,
      asset: options.assetId,
      exp: Math.floor(expiresAt.getTime() / 1000),
    });
    return `${this.storageUrl}/object/sign/${storagePathOf(key)}?token=${token}`;
  }

  /**
   * Streams `body` to a temporary file, hashing and counting as it goes; past `maxBytes` it stops
   * and throws TooLargeError, leaving nothing behind. Memory stays at one chunk whatever the size.
   */
  async receive(key: string, body: Readable, maxBytes: number): Promise<Received> {
    const target = this.file(key);
    this.uploadsDir ??= mkdir(path.join(this.root, ".uploads"), { recursive: true }).then(
      () => path.join(this.root, ".uploads"),
      (error: unknown) => {
        this.uploadsDir = undefined;
        throw error;
      },
    );
    const tmpDir = await this.uploadsDir;
    const tmp = path.join(tmpDir, `${randomUUID()}.part`);
    const hash = createHash("sha256");
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        if (bytes > maxBytes) return callback(new TooLargeError(maxBytes));
        hash.update(chunk);
        callback(null, chunk);
      },
    });
    try {
      // flush: the file is fsynced through the descriptor that wrote it, before it is closed.
      await pipeline(body, counter, createWriteStream(tmp, { flags: "wx", mode: 0o640, flush: true }));
    } catch (error) {
      await rm(tmp, { force: true });
      // The directory went away meanwhile (a restore): the next upload makes it again.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") this.uploadsDir = undefined;
      throw error;
    }
    return {
      bytes,
      sha256: hash.digest("hex"),
      commit: async () => {
        // The directory is made once (a rename into a missing one fails with ENOENT), not asked each time.
        await rename(tmp, target).catch(async (error: NodeJS.ErrnoException) => {
          if (error.code !== "ENOENT") throw error;
          await mkdir(path.dirname(target), { recursive: true });
          await rename(tmp, target);
        });
        const dir = await open(path.dirname(target), "r");
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
      },
      discard: () => rm(tmp, { force: true }),
    };
  }

  async stat(key: string): Promise<ObjectInfo | undefined> {
    const s = await stat(this.file(key)).catch(() => undefined);
    return s?.isFile() ? { bytes: s.size } : undefined;
  }

  async read(key: string, range?: { start: number; end?: number }): Promise<Readable> {
    // Opened here (a missing object rejects now), then streamed from that descriptor.
    const handle = await open(this.file(key), "r");
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async localCopy(key: string): Promise<{ path: string; release(): Promise<void> }> {
    const file = this.file(key);
    await stat(file);
    return { path: file, release: async () => {} };
  }

  async remove(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
  }

  async put(key: string, body: Readable, options: PutOptions): Promise<{ bytes: number; sha256: string }> {
    const received = await this.receive(key, body, options.maxBytes);
    await received.commit();
    return { bytes: received.bytes, sha256: received.sha256 };
  }

  async copy(from: string, to: string): Promise<void> {
    const received = await this.receive(to, createReadStream(this.file(from)), Number.MAX_SAFE_INTEGER);
    await received.commit();
  }
}
