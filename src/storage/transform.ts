import type { Readable } from "node:stream";
import type { ObjectStore } from "./driver.ts";
import { STORAGE_ERRORS, StorageError } from "./errors.ts";

/**
 * Image transforms of /storage/v1 (docs/uploads.md, "Image transforms"), as Supabase Storage offers
 * them: `/render/image/authenticated|public|sign/{bucket}/{path}` with `width`, `height`, `resize`
 * (cover, contain, fill), `quality` (20–100) and `format` (`origin` keeps the source's format;
 * absent, WebP when the client accepts it). Done with sharp, bounded so that one image cannot tie
 * up the server: the source object's size, its declared pixels (read from the header before any
 * pixel is decoded, so a small file declaring a huge picture is refused at once), the output's
 * sides, a time limit per transform, and how many run at once (the rest wait in a short queue;
 * beyond it the server answers 503 and the client retries).
 */

export interface TransformOptions {
  width?: number;
  height?: number;
  resize?: "cover" | "contain" | "fill";
  quality?: number;
  format?: "origin" | "avif" | "webp";
}

export interface TransformLimits {
  /** Largest source object, bytes. */
  maxSourceBytes: number;
  /** Largest source picture, width × height as declared by its header. */
  maxInputPixels: number;
  /** Largest output side, pixels. */
  maxDimension: number;
  /** Time limit of one transform, seconds. */
  timeoutSeconds: number;
  /** Transforms running at once; and how many more may wait. */
  concurrency: number;
  queue: number;
}

/**
 * The defaults (IMAGE_TRANSFORM_MAX_BYTES, IMAGE_TRANSFORM_MAX_PIXELS, IMAGE_TRANSFORM_TIMEOUT_SECONDS
 * in src/config.ts): the largest cover an upload takes (50 MiB, 10000 × 10000) can be transformed.
 */
export const TRANSFORM_LIMITS: TransformLimits = {
  maxSourceBytes: 50 * 1024 * 1024,
  maxInputPixels: 100_000_000,
  maxDimension: 2500,
  timeoutSeconds: 10,
  concurrency: 2,
  queue: 16,
};

const RESIZE = ["cover", "contain", "fill"] as const;
const FIT = { cover: "cover", contain: "inside", fill: "fill" } as const;
const FORMATS = ["origin", "avif", "webp"] as const;
/** Source formats transformed (sharp's names); anything else — SVG, PDF, TIFF, RAW — is refused. */
const SOURCES = new Set(["jpeg", "png", "webp", "gif", "heif"]);
const TYPE_OF: Record<string, string> = {
  jpeg: "image/jpeg",
  png: "image/png",
  webp: "image/webp",
  gif: "image/gif",
  avif: "image/avif",
};

function whole(name: string, value: unknown, min: number, max: number): number {
  const text = String(value);
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isInteger(n) || n < min || n > max) {
    throw STORAGE_ERRORS.invalidParameter(name, `${name} must be a whole number from ${min} to ${max}`);
  }
  return n;
}

/**
 * The transform a query string (render routes) or a `transform` object (createSignedUrl's body)
 * asks for; undefined when it asks for none. Refuses, field by field, what is out of range.
 */
export function parseTransform(
  input: Record<string, unknown> | undefined,
  limits: TransformLimits = TRANSFORM_LIMITS,
): TransformOptions | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== "object" || Array.isArray(input)) {
    throw STORAGE_ERRORS.invalidParameter("transform", "transform is an object");
  }
  const out: TransformOptions = {};
  const given = (key: string) => input[key] !== undefined && input[key] !== null && input[key] !== "";
  if (given("width")) out.width = whole("width", input.width, 1, limits.maxDimension);
  if (given("height")) out.height = whole("height", input.height, 1, limits.maxDimension);
  if (given("quality")) out.quality = whole("quality", input.quality, 20, 100);
  if (given("resize")) {
    if (!(RESIZE as readonly unknown[]).includes(input.resize)) {
      throw STORAGE_ERRORS.invalidParameter("resize", "resize must be one of cover, contain, fill");
    }
    out.resize = input.resize as TransformOptions["resize"];
  }
  if (given("format")) {
    if (!(FORMATS as readonly unknown[]).includes(input.format)) {
      throw STORAGE_ERRORS.invalidParameter("format", "format must be one of origin, avif, webp");
    }
    out.format = input.format as TransformOptions["format"];
  }
  return out;
}

/** The transform as a token carries it (only the known keys, in a fixed order). */
export function transformClaim(options: TransformOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of ["width", "height", "resize", "quality", "format"] as const) {
    if (options[key] !== undefined) out[key] = options[key];
  }
  return out;
}

/** A query string for a transform (appended to a signed render URL for the reader's eyes only). */
export function transformQuery(options: TransformOptions): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(transformClaim(options))) q.set(k, String(v));
  return q.toString();
}

/** A small gate: at most `concurrency` transforms at once, `queue` more waiting. */
class Gate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly limits: TransformLimits;
  constructor(limits: TransformLimits) {
    this.limits = limits;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= this.limits.concurrency) {
      if (this.waiting.length >= this.limits.queue) {
        throw new StorageError(
          503,
          "SlowDown",
          "Too many image transforms are running: try again in a moment",
          "Service Unavailable",
        );
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

const gates = new WeakMap<TransformLimits, Gate>();
function gateFor(limits: TransformLimits): Gate {
  let gate = gates.get(limits);
  if (!gate) {
    gate = new Gate(limits);
    gates.set(limits, gate);
  }
  return gate;
}

const notImage = (why: string) =>
  new StorageError(422, "InvalidImage", `The object cannot be transformed: ${why}`, "Unprocessable Entity");

/** Reads at most `max` bytes of a stream (413 EntityTooLarge beyond). */
export async function readBounded(stream: Readable, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += (chunk as Buffer).length;
    if (total > max) {
      stream.destroy();
      throw STORAGE_ERRORS.tooLarge(`the maximum size of an image to transform (${max} bytes)`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export interface Transformed {
  body: Buffer;
  contentType: string;
  /** True when the output's format followed the request's Accept header (answer with Vary: Accept). */
  negotiated: boolean;
  /** What was applied, as Storage's `X-Transformations` header says it. */
  applied: string;
}

/**
 * The `X-Transformations` header Storage answers with: its renderer's (imgproxy's) words, where
 * cover is `fill`, contain `fit` and fill `force`.
 */
export function transformationsHeader(options: TransformOptions): string {
  const parts: string[] = [];
  if (options.height) parts.push(`height:${options.height}`);
  if (options.width) parts.push(`width:${options.width}`);
  if (options.width || options.height) {
    parts.push(
      `resizing_type:${{ cover: "fill", contain: "fit", fill: "force" }[options.resize ?? "cover"]}`,
    );
  }
  if (options.quality) parts.push(`quality:${options.quality}`);
  if (options.format && options.format !== "origin") parts.push(`format:${options.format}`);
  return parts.join(",");
}

/**
 * Transforms `source` (the whole object) as `options` asks. `accept` is the request's Accept
 * header: without `format`, the output is WebP when the client takes it, else the source's format.
 */
export async function transformImage(
  source: Buffer,
  options: TransformOptions,
  accept: string | undefined,
  limits: TransformLimits = TRANSFORM_LIMITS,
): Promise<Transformed> {
  const sharp = (await import("sharp")).default;
  return gateFor(limits).run(async () => {
    const open = () =>
      sharp(source, { limitInputPixels: limits.maxInputPixels, failOn: "error", animated: false }).timeout({
        seconds: limits.timeoutSeconds,
      });
    let format: string | undefined;
    try {
      const meta = await open().metadata();
      format = meta.format;
      if (!meta.width || !meta.height) throw notImage("its size is unknown");
      if (meta.width * meta.height > limits.maxInputPixels) {
        throw tooManyPixels(limits);
      }
    } catch (error) {
      throw refusal(error, limits);
    }
    if (!format || !SOURCES.has(format)) {
      throw notImage(`${format ?? "this"} is not a format that is transformed (JPEG, PNG, WebP, GIF, AVIF)`);
    }
    const sourceFormat = format === "heif" ? "avif" : format;
    let outFormat: string;
    let negotiated = false;
    if (options.format === "avif" || options.format === "webp") outFormat = options.format;
    else if (options.format === "origin") outFormat = sourceFormat;
    else {
      negotiated = true;
      outFormat = /image\/webp/i.test(accept ?? "") ? "webp" : sourceFormat;
    }
    let pipeline = open().rotate();
    if (options.width || options.height) {
      pipeline = pipeline.resize({
        ...(options.width ? { width: options.width } : {}),
        ...(options.height ? { height: options.height } : {}),
        // Storage's modes: cover crops to the box, contain fits inside it, fill stretches to it.
        fit: FIT[options.resize ?? "cover"],
        // Never larger than the source: one side of 2,500 asked of a 1-pixel-wide strip must not
        // make the other side hundreds of thousands of pixels.
        withoutEnlargement: true,
      });
    }
    const quality = options.quality ?? 80;
    if (outFormat === "avif") pipeline = pipeline.avif({ quality });
    else if (outFormat === "webp") pipeline = pipeline.webp({ quality });
    else if (outFormat === "jpeg") pipeline = pipeline.jpeg({ quality });
    else if (outFormat === "png") pipeline = pipeline.png();
    else pipeline = pipeline.gif();
    try {
      const body = await pipeline.toBuffer();
      return {
        body,
        contentType: TYPE_OF[outFormat] ?? "application/octet-stream",
        negotiated,
        applied: transformationsHeader(options),
      };
    } catch (error) {
      throw refusal(error, limits);
    }
  });
}

const tooManyPixels = (limits: TransformLimits) =>
  new StorageError(
    422,
    "InvalidImage",
    `The image is larger than ${limits.maxInputPixels} pixels, the most this server transforms`,
    "Unprocessable Entity",
  );

/** sharp's failures in Storage's words: a timeout is a 504, a bad or oversized picture a 422. */
function refusal(error: unknown, limits: TransformLimits): unknown {
  if (error instanceof StorageError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (/timeout/i.test(message)) {
    return new StorageError(
      504,
      "TransformTimeout",
      `The image transform took longer than ${limits.timeoutSeconds} seconds and was stopped`,
      "Gateway Timeout",
    );
  }
  if (/pixel limit/i.test(message)) return tooManyPixels(limits);
  return notImage("it is not an image this server can read");
}

/**
 * Reads a stored object of `bytes` bytes (refused beyond the source limit before a byte is read)
 * and transforms it.
 */
export async function transformStored(
  store: ObjectStore,
  key: string,
  bytes: number,
  options: TransformOptions,
  accept: string | undefined,
  limits: TransformLimits = TRANSFORM_LIMITS,
): Promise<Transformed> {
  if (bytes > limits.maxSourceBytes) {
    throw STORAGE_ERRORS.tooLarge(
      `the maximum size of an image to transform (${limits.maxSourceBytes} bytes)`,
    );
  }
  const source = await readBounded(await store.read(key), limits.maxSourceBytes);
  return transformImage(source, options, accept, limits);
}
