import { open, stat } from "node:fs/promises";
import type { Metadata, default as SharpFn } from "sharp";

/**
 * Inspection of uploaded media (issue 8, docs/uploads.md): what the bytes of a local file are,
 * never what its name or declared content type say. Artwork is checked with sharp, audio with
 * music-metadata plus a structural walk of the WAV chunks or the FLAC frames.
 *
 * Inspections never throw for a bad file: every failure is a problem with a stable machine `code`
 * (see PROBLEM_CODES) and a message that says what was found and what is needed, and all of them
 * are listed at once. They throw only for I/O errors (a missing path, a directory, …).
 *
 * Memory stays bounded whatever the file's size: the sniff and the WAV header walk read a few
 * bytes at known offsets; music-metadata reads headers only; the FLAC frame walk streams the file
 * in 1 MiB pieces; sharp decodes the image to a 64×64 thumbnail (JPEG shrink-on-load, sequential
 * PNG) and refuses images over ARTWORK_LIMITS.maxPixels before decoding them.
 */

export type Problem = { code: ProblemCode; message: string };

export type Inspection = {
  valid: boolean;
  problems: Problem[];
  metadata: Record<string, unknown>;
};

/** `metadata` of an artwork inspection; fields are present as far as they could be measured. */
export type ArtworkMetadata = {
  format: "jpeg" | "png";
  width: number;
  height: number;
  color_space: string;
  channels: number;
  bytes: number;
};

/** `metadata` of an audio inspection; fields are present as far as they could be measured. */
export type AudioMetadata = {
  format: "wav" | "flac";
  codec: string;
  sample_rate: number;
  bit_depth: number;
  channels: number;
  duration_seconds: number;
  bytes: number;
};

/** Every problem code an inspection can report. */
export const PROBLEM_CODES = [
  /** An image whose magic bytes are right but whose header sharp cannot parse at all. */
  "unreadable",
  /** Not a JPEG/PNG (artwork) or PCM WAV/FLAC (audio) — by the bytes, whatever the name. */
  "unsupported_format",
  /** A content type was declared and the bytes are something else. */
  "content_type_mismatch",
  /** Artwork is not RGB (CMYK, greyscale, …). */
  "not_rgb",
  /** Artwork has an alpha (transparency) channel. */
  "has_alpha",
  "not_square",
  "too_small",
  "too_large",
  /** 0 bytes, or audio with no samples. */
  "empty",
  /**
   * Truncated or damaged: the image cannot be decoded; a WAV lacks its fmt/data chunk or its data
   * chunk claims more bytes than the file holds; a FLAC lacks STREAMINFO, has no audio frame, a frame
   * fails its CRC, or the frames hold fewer samples than STREAMINFO declares.
   */
  "corrupt",
  "bit_depth",
  "sample_rate",
  "channels",
] as const;

export type ProblemCode = (typeof PROBLEM_CODES)[number];

/**
 * Artwork must be a square RGB JPEG or PNG of minSide…maxSide pixels a side, without alpha.
 * The maximum keeps decoding bounded (10000×10000×3 = 300 MB if fully decoded) and is above what
 * any store asks for. Colour spaces: sharp's `srgb` (8-bit) and `rgb16` (16-bit PNG); embedded ICC
 * profiles are not checked. Any alpha channel is refused, even a fully opaque one: stores refuse
 * transparency, and an opaque alpha channel is trivially removed by re-exporting.
 */
export const ARTWORK_LIMITS = {
  formats: ["jpeg", "png"],
  colorSpaces: ["srgb", "rgb16"],
  minSide: 3000,
  maxSide: 10000,
  maxPixels: 10000 * 10000,
} as const;

/**
 * Audio must be PCM WAV or FLAC, 16 or 24 bit, 44.1 kHz up to 192 kHz, exactly 2 channels. WAV
 * means RIFF/WAVE with format tag 1 (PCM) or 0xFFFE (extensible) with the PCM sub-format; RF64,
 * big-endian RIFX and float WAVs are unsupported.
 */
export const AUDIO_LIMITS = {
  formats: ["wav", "flac"],
  bitDepths: [16, 24],
  minSampleRate: 44100,
  maxSampleRate: 192000,
  channels: 2,
} as const;

/** Content types a client may declare, by detected format. Compared case-insensitively without parameters. */
export const CONTENT_TYPES = {
  jpeg: ["image/jpeg"],
  png: ["image/png"],
  wav: ["audio/wav", "audio/x-wav", "audio/wave"],
  flac: ["audio/flac", "audio/x-flac"],
} as const;

type Detected = "jpeg" | "png" | "wav" | "flac" | "rf64" | "rifx" | "riff" | "gif" | "webp" | "unknown";

const DESCRIPTION: Record<Detected, string> = {
  jpeg: "a JPEG image",
  png: "a PNG image",
  wav: "a WAV file",
  flac: "a FLAC file",
  rf64: "an RF64 (64-bit WAV) file",
  rifx: "a big-endian RIFX file",
  riff: "a RIFF file that is not WAVE",
  gif: "a GIF image",
  webp: "a WebP image",
  unknown: "not a recognised image or audio format",
};

const SNIFF_BYTES = 16;

/** The format the first bytes announce, and where a FLAC stream starts (after an ID3v2 tag). */
async function sniff(path: string, size: number): Promise<{ kind: Detected; offset: number }> {
  const head = await readAt(path, 0, SNIFF_BYTES);
  const ascii = (from: number, to: number) => head.subarray(from, to).toString("latin1");
  if (head.length >= 3 && head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff)
    return { kind: "jpeg", offset: 0 };
  if (
    head.length >= 8 &&
    head.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))
  )
    return { kind: "png", offset: 0 };
  if (ascii(0, 4) === "RIFF") {
    const form = ascii(8, 12);
    return { kind: form === "WAVE" ? "wav" : form === "WEBP" ? "webp" : "riff", offset: 0 };
  }
  if (ascii(0, 4) === "RF64") return { kind: "rf64", offset: 0 };
  if (ascii(0, 4) === "RIFX") return { kind: "rifx", offset: 0 };
  if (ascii(0, 4) === "fLaC") return { kind: "flac", offset: 0 };
  if (ascii(0, 6) === "GIF87a" || ascii(0, 6) === "GIF89a") return { kind: "gif", offset: 0 };
  if (ascii(0, 3) === "ID3" && head.length >= 10) {
    // An ID3v2 tag some tools put before a FLAC stream: a syncsafe size, plus a footer when flagged.
    const b = head;
    const tagSize = ((b[6] ?? 0) << 21) | ((b[7] ?? 0) << 14) | ((b[8] ?? 0) << 7) | (b[9] ?? 0);
    const offset = 10 + tagSize + ((b[5] ?? 0) & 0x10 ? 10 : 0);
    if (offset + 4 <= size && (await readAt(path, offset, 4)).toString("latin1") === "fLaC") {
      return { kind: "flac", offset };
    }
  }
  return { kind: "unknown", offset: 0 };
}

async function readAt(path: string, position: number, length: number): Promise<Buffer> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await fh.read(buf, 0, length, position);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

function normaliseType(contentType: string): string {
  return (contentType.split(";")[0] ?? "").trim().toLowerCase();
}

function checkDeclared(
  problems: Problem[],
  declared: string | undefined,
  detected: Detected,
  accepted: ("jpeg" | "png" | "wav" | "flac")[],
): void {
  if (declared === undefined) return;
  const type = normaliseType(declared);
  const matches =
    (accepted as string[]).includes(detected) &&
    (CONTENT_TYPES[detected as keyof typeof CONTENT_TYPES] as readonly string[]).includes(type);
  if (matches) return;
  const expected = (accepted as string[]).includes(detected)
    ? `; declare it as ${CONTENT_TYPES[detected as keyof typeof CONTENT_TYPES].join(" or ")}`
    : "";
  problems.push({
    code: "content_type_mismatch",
    message: `the upload was declared as ${type || "(empty)"} but the file is ${DESCRIPTION[detected]}${expected}`,
  });
}

function result(problems: Problem[], metadata: Record<string, unknown>): Inspection {
  return { valid: problems.length === 0, problems, metadata };
}

async function fileSize(path: string): Promise<number> {
  const s = await stat(path);
  if (!s.isFile()) throw Object.assign(new Error(`not a regular file: ${path}`), { code: "EISDIR" });
  return s.size;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

// ---------------------------------------------------------------------------------------------
// Artwork

const THUMB = 64;

export async function inspectArtwork(path: string, declaredContentType?: string): Promise<Inspection> {
  const bytes = await fileSize(path);
  const problems: Problem[] = [];
  const metadata: Record<string, unknown> = { bytes };
  if (bytes === 0) {
    problems.push({
      code: "empty",
      message: "the file is empty (0 bytes); artwork must be a JPEG or PNG image",
    });
    return result(problems, metadata);
  }
  const { kind } = await sniff(path, bytes);
  checkDeclared(problems, declaredContentType, kind, ["jpeg", "png"]);
  if (kind !== "jpeg" && kind !== "png") {
    problems.push({
      code: "unsupported_format",
      message: `the file is ${DESCRIPTION[kind]}; artwork must be a JPEG or PNG image`,
    });
    return result(problems, metadata);
  }
  metadata.format = kind;
  const label = kind === "jpeg" ? "JPEG" : "PNG";

  let info: Metadata;
  try {
    info = await (await loadSharp())(path, { limitInputPixels: false }).metadata();
  } catch (e) {
    problems.push({
      code: "unreadable",
      message: `the file starts like a ${label} image but its header cannot be read (${errorText(e)})`,
    });
    return result(problems, metadata);
  }
  const width = info.width ?? 0;
  const height = info.height ?? 0;
  Object.assign(metadata, {
    width,
    height,
    color_space: info.space ?? "unknown",
    channels: info.channels ?? 0,
  });

  const space = info.space ?? "unknown";
  if (!(ARTWORK_LIMITS.colorSpaces as readonly string[]).includes(space)) {
    const name = space === "cmyk" ? "CMYK" : space === "b-w" || space === "grey16" ? "greyscale" : space;
    problems.push({ code: "not_rgb", message: `the image is ${name}; artwork must be RGB (sRGB)` });
  }
  if (info.hasAlpha) {
    problems.push({
      code: "has_alpha",
      message: `the ${label} has an alpha (transparency) channel; artwork must be RGB without alpha`,
    });
  }
  if (width !== height) {
    problems.push({
      code: "not_square",
      message: `the image is ${width}×${height} pixels; artwork must be square`,
    });
  }
  const min = ARTWORK_LIMITS.minSide;
  const max = ARTWORK_LIMITS.maxSide;
  if (width < min || height < min) {
    problems.push({
      code: "too_small",
      message: `the image is ${width}×${height} pixels; artwork must be at least ${min}×${min}`,
    });
  }
  if (width > max || height > max) {
    problems.push({
      code: "too_large",
      message: `the image is ${width}×${height} pixels; artwork must be at most ${max}×${max}`,
    });
  } else {
    // Decode it all (to a thumbnail, so memory stays small): a truncated or damaged image fails here.
    try {
      await (await loadSharp())(path, {
        failOn: "error",
        sequentialRead: true,
        limitInputPixels: ARTWORK_LIMITS.maxPixels,
      })
        .resize(THUMB, THUMB, { fit: "fill" })
        .raw()
        .toBuffer();
    } catch (e) {
      problems.push({
        code: "corrupt",
        message: `the ${label} image cannot be decoded, it is truncated or damaged (${errorText(e)}); upload the complete file`,
      });
    }
  }
  return result(problems, metadata);
}

// ---------------------------------------------------------------------------------------------
// Audio

/** The whole-seconds duration to store on a track (rounded, at least 1), or undefined. */
export function trackDurationOf(metadata: Record<string, unknown>): number | undefined {
  const d = metadata.duration_seconds;
  if (typeof d !== "number" || !Number.isFinite(d) || d <= 0) return undefined;
  return Math.max(1, Math.round(d));
}

type Stream = {
  /** What the headers say; undefined when there are none to read. */
  codec?: string;
  sampleRate?: number;
  bitDepth?: number;
  channels?: number;
  samples?: number;
};

export async function inspectAudio(path: string, declaredContentType?: string): Promise<Inspection> {
  const bytes = await fileSize(path);
  const problems: Problem[] = [];
  const metadata: Record<string, unknown> = { bytes };
  if (bytes === 0) {
    problems.push({
      code: "empty",
      message: "the file is empty (0 bytes); audio must be a WAV or FLAC file",
    });
    return result(problems, metadata);
  }
  const { kind, offset } = await sniff(path, bytes);
  checkDeclared(problems, declaredContentType, kind, ["wav", "flac"]);
  if (kind !== "wav" && kind !== "flac") {
    problems.push({
      code: "unsupported_format",
      message: `the file is ${DESCRIPTION[kind]}; audio must be a PCM WAV or FLAC file`,
    });
    return result(problems, metadata);
  }
  metadata.format = kind;

  const stream =
    kind === "wav" ? await walkWav(path, bytes, problems) : await walkFlac(path, bytes, offset, problems);
  if (!stream) return result(problems, metadata);

  // music-metadata as a second reader of the headers: a file it cannot parse is damaged.
  let codec = stream.codec;
  try {
    const { parseFile } = await import("music-metadata");
    const parsed = await parseFile(path, { duration: false, skipCovers: true });
    codec = parsed.format.codec ?? codec;
  } catch (e) {
    if (!problems.some((p) => p.code === "corrupt")) {
      problems.push({
        code: "corrupt",
        message: `the ${kind.toUpperCase()} file cannot be parsed (${errorText(e)})`,
      });
    }
  }

  if (codec !== undefined) metadata.codec = codec;
  if (stream.sampleRate !== undefined) metadata.sample_rate = stream.sampleRate;
  if (stream.bitDepth !== undefined) metadata.bit_depth = stream.bitDepth;
  if (stream.channels !== undefined) metadata.channels = stream.channels;
  if (stream.samples !== undefined && stream.sampleRate) {
    metadata.duration_seconds = Math.round((stream.samples / stream.sampleRate) * 1000) / 1000;
  }

  if (
    stream.bitDepth !== undefined &&
    !(AUDIO_LIMITS.bitDepths as readonly number[]).includes(stream.bitDepth)
  ) {
    problems.push({
      code: "bit_depth",
      message: `the audio is ${stream.bitDepth}-bit; audio must be 16-bit or 24-bit`,
    });
  }
  if (stream.sampleRate !== undefined) {
    const rate = stream.sampleRate;
    if (rate < AUDIO_LIMITS.minSampleRate) {
      problems.push({
        code: "sample_rate",
        message: `the audio is sampled at ${rate} Hz; audio must be sampled at ${AUDIO_LIMITS.minSampleRate} Hz or more`,
      });
    } else if (rate > AUDIO_LIMITS.maxSampleRate) {
      problems.push({
        code: "sample_rate",
        message: `the audio is sampled at ${rate} Hz; audio must be sampled at ${AUDIO_LIMITS.maxSampleRate} Hz or less`,
      });
    }
  }
  if (stream.channels !== undefined && stream.channels !== AUDIO_LIMITS.channels) {
    const found = stream.channels === 1 ? "mono (1 channel)" : `${stream.channels} channels`;
    problems.push({ code: "channels", message: `the audio is ${found}; audio must be stereo (2 channels)` });
  }
  if (stream.samples === 0 && !problems.some((p) => p.code === "corrupt")) {
    problems.push({ code: "empty", message: `the ${kind.toUpperCase()} file holds no audio samples` });
  }
  return result(problems, metadata);
}

const MAX_CHUNKS = 4096;
const PCM_GUID_TAIL = Buffer.from("000000001000800000aa00389b71", "hex");

/** Walks a RIFF/WAVE file's chunk headers (never its data) to find `fmt ` and `data`. */
async function walkWav(path: string, size: number, problems: Problem[]): Promise<Stream | undefined> {
  let fmt: Buffer | undefined;
  let dataAt = -1;
  let dataBytes = 0;
  let pos = 12;
  for (let n = 0; n < MAX_CHUNKS && pos + 8 <= size && (!fmt || dataAt < 0); n++) {
    const head = await readAt(path, pos, 8);
    const id = head.subarray(0, 4).toString("latin1");
    const length = head.readUInt32LE(4);
    if (id === "fmt ") fmt = await readAt(path, pos + 8, Math.min(length, 40));
    if (id === "data" && dataAt < 0) {
      dataAt = pos + 8;
      dataBytes = length;
    }
    pos += 8 + length + (length % 2);
  }
  if (!fmt || fmt.length < 16) {
    problems.push({
      code: "corrupt",
      message: fmt
        ? `the WAV format chunk is ${fmt.length} bytes; it must be at least 16`
        : "the WAV file has no format (fmt) chunk, so its audio cannot be read",
    });
    return undefined;
  }
  let tag = fmt.readUInt16LE(0);
  const channels = fmt.readUInt16LE(2);
  const sampleRate = fmt.readUInt32LE(4);
  const blockAlign = fmt.readUInt16LE(12);
  let bitDepth = fmt.readUInt16LE(14);
  if (tag === 0xfffe && fmt.length >= 40) {
    // WAVE_FORMAT_EXTENSIBLE: the sub-format GUID's first two bytes are the real format tag.
    const valid = fmt.readUInt16LE(18);
    if (valid > 0 && valid < bitDepth) bitDepth = valid;
    tag = fmt.subarray(26, 40).equals(PCM_GUID_TAIL) ? fmt.readUInt16LE(24) : -1;
  }
  if (tag !== 1) {
    const name = tag === 3 ? "32-bit float" : tag === -1 ? "an unknown sub-format" : `format tag ${tag}`;
    problems.push({
      code: "unsupported_format",
      message: `the WAV holds ${name} audio, not PCM; audio must be a PCM WAV or FLAC file`,
    });
  }
  const codec = tag === 1 ? "PCM" : tag === 3 ? "IEEE_FLOAT" : `non-PCM (${tag})`;
  const stream: Stream = { codec, sampleRate, bitDepth, channels };
  const frameBytes = channels * Math.ceil(bitDepth / 8);
  if (channels === 0 || sampleRate === 0 || blockAlign === 0 || (tag === 1 && blockAlign !== frameBytes)) {
    problems.push({
      code: "corrupt",
      message: `the WAV format chunk is inconsistent (${channels} channels, ${sampleRate} Hz, ${bitDepth} bits, ${blockAlign} bytes a frame)`,
    });
    return stream;
  }
  if (dataAt < 0) {
    problems.push({ code: "corrupt", message: "the WAV file has no data chunk; it is truncated or damaged" });
    return stream;
  }
  const available = size - dataAt;
  if (dataBytes > available) {
    problems.push({
      code: "corrupt",
      message: `the WAV data chunk claims ${dataBytes} bytes but the file holds only ${available} after its header; the file is truncated — upload the complete file`,
    });
  }
  stream.samples = Math.floor(Math.min(dataBytes, available) / blockAlign);
  return stream;
}

// FLAC (RFC 9639) ------------------------------------------------------------------------------

const CRC8 = new Uint8Array(256);
const CRC16 = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c8 = i;
  let c16 = i << 8;
  for (let b = 0; b < 8; b++) {
    c8 = c8 & 0x80 ? ((c8 << 1) ^ 0x07) & 0xff : (c8 << 1) & 0xff;
    c16 = c16 & 0x8000 ? ((c16 << 1) ^ 0x8005) & 0xffff : (c16 << 1) & 0xffff;
  }
  CRC8[i] = c8;
  CRC16[i] = c16;
}

/** CRC-8 (polynomial 0x07, init 0) as in FLAC frame headers. */
export function crc8(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let c = 0;
  for (let i = start; i < end; i++) c = CRC8[c ^ (bytes[i] as number)] as number;
  return c;
}

/** CRC-16 (polynomial 0x8005, init 0) as at the end of FLAC frames. */
export function crc16(bytes: Uint8Array, start = 0, end = bytes.length, init = 0): number {
  let c = init;
  for (let i = start; i < end; i++)
    c = (((c << 8) & 0xffff) ^ (CRC16[(c >> 8) ^ (bytes[i] as number)] as number)) & 0xffff;
  return c;
}

const MAX_FRAME_HEADER = 16;

type FrameHeader = { variable: boolean; number: number; blockSize: number; channels: number };

/** Parses a frame header at `i` and checks its CRC-8; undefined when it is not one. */
function frameHeader(buf: Uint8Array, i: number): FrameHeader | undefined {
  if (i + 6 > buf.length) return undefined;
  const b1 = buf[i + 1] as number;
  const b2 = buf[i + 2] as number;
  const b3 = buf[i + 3] as number;
  if (buf[i] !== 0xff || (b1 & 0xfe) !== 0xf8) return undefined;
  const sizeCode = b2 >> 4;
  const rateCode = b2 & 0x0f;
  const assignment = b3 >> 4;
  const depthCode = (b3 >> 1) & 0x07;
  if (sizeCode === 0 || rateCode === 0x0f || assignment > 10 || depthCode === 3 || b3 & 1) return undefined;
  let p = i + 4;
  // The frame or sample number, UTF-8 coded (up to 7 bytes).
  const lead = buf[p++] as number;
  let extra: number;
  let number: number;
  if (lead < 0x80) [extra, number] = [0, lead];
  else if ((lead & 0xe0) === 0xc0) [extra, number] = [1, lead & 0x1f];
  else if ((lead & 0xf0) === 0xe0) [extra, number] = [2, lead & 0x0f];
  else if ((lead & 0xf8) === 0xf0) [extra, number] = [3, lead & 0x07];
  else if ((lead & 0xfc) === 0xf8) [extra, number] = [4, lead & 0x03];
  else if ((lead & 0xfe) === 0xfc) [extra, number] = [5, lead & 0x01];
  else if (lead === 0xfe) [extra, number] = [6, 0];
  else return undefined;
  if (p + extra > buf.length) return undefined;
  for (let k = 0; k < extra; k++) {
    const c = buf[p++] as number;
    if ((c & 0xc0) !== 0x80) return undefined;
    number = number * 64 + (c & 0x3f);
  }
  let blockSize: number;
  if (sizeCode === 1) blockSize = 192;
  else if (sizeCode <= 5) blockSize = 576 * 2 ** (sizeCode - 2);
  else if (sizeCode === 6) {
    if (p + 1 > buf.length) return undefined;
    blockSize = (buf[p++] as number) + 1;
  } else if (sizeCode === 7) {
    if (p + 2 > buf.length) return undefined;
    blockSize = (((buf[p] as number) << 8) | (buf[p + 1] as number)) + 1;
    p += 2;
  } else blockSize = 256 * 2 ** (sizeCode - 8);
  if (rateCode === 12) p += 1;
  else if (rateCode === 13 || rateCode === 14) p += 2;
  if (p + 1 > buf.length) return undefined;
  if (crc8(buf, i, p) !== buf[p]) return undefined;
  return { variable: (b1 & 1) === 1, number, blockSize, channels: assignment < 8 ? assignment + 1 : 2 };
}

const SCAN_CHUNK = 1 << 20;

/**
 * Reads a FLAC stream's metadata blocks, then walks every frame from start to end: a frame starts
 * at a sync code whose header has a valid CRC-8 and the expected frame (or sample) number, and the
 * bytes since the previous frame start must end with a valid CRC-16. A truncated or damaged stream
 * fails the CRC-16 or counts fewer samples than STREAMINFO declares. Subframes are not decoded (so
 * the MD5 signature is not checked).
 */
async function walkFlac(
  path: string,
  size: number,
  start: number,
  problems: Problem[],
): Promise<Stream | undefined> {
  let pos = start + 4;
  let info: Buffer | undefined;
  let first = true;
  for (let n = 0; n < MAX_CHUNKS; n++) {
    if (pos + 4 > size) {
      problems.push({
        code: "corrupt",
        message: "the FLAC metadata blocks end before the file's end; it is truncated",
      });
      return undefined;
    }
    const head = await readAt(path, pos, 4);
    const type = (head[0] as number) & 0x7f;
    const length = head.readUIntBE(1, 3);
    if (first && (type !== 0 || length !== 34)) {
      problems.push({
        code: "corrupt",
        message: "the FLAC stream has no STREAMINFO block first, so its audio cannot be read",
      });
      return undefined;
    }
    if (first) info = await readAt(path, pos + 4, 34);
    first = false;
    pos += 4 + length;
    if ((head[0] as number) & 0x80) break;
  }
  if (!info || info.length < 34) {
    problems.push({ code: "corrupt", message: "the FLAC STREAMINFO block is truncated" });
    return undefined;
  }
  const sampleRate = (info.readUIntBE(10, 3) >> 4) & 0xfffff;
  const channels = ((info[12] as number) >> 1) & 0x07;
  const bitDepth = ((((info[12] as number) & 1) << 4) | ((info[13] as number) >> 4)) + 1;
  const declared = ((info[13] as number) & 0x0f) * 2 ** 32 + info.readUInt32BE(14);
  const stream: Stream = { codec: "FLAC", sampleRate, bitDepth, channels: channels + 1 };
  if (sampleRate === 0) {
    problems.push({ code: "corrupt", message: "the FLAC STREAMINFO block gives a sample rate of 0 Hz" });
    return stream;
  }
  if (pos > size) {
    problems.push({
      code: "corrupt",
      message: "the FLAC metadata blocks end after the file's end; it is truncated",
    });
    return stream;
  }
  if (pos === size) {
    if (declared === 0) stream.samples = 0;
    else
      problems.push({
        code: "corrupt",
        message: `the FLAC stream has no audio frame after its metadata (STREAMINFO declares ${declared} samples); the file is truncated`,
      });
    return stream;
  }

  // An ID3v1 tag some tools append after the last frame is not part of the stream.
  const end =
    size - 128 > pos && (await readAt(path, size - 128, 3)).toString("latin1") === "TAG" ? size - 128 : size;
  const walk = await walkFrames(path, pos, end, channels + 1);
  if (walk.frames === 0) {
    problems.push({
      code: "corrupt",
      message: "no valid FLAC audio frame follows the metadata; the file is damaged",
    });
    return stream;
  }
  if (!walk.complete) {
    problems.push({
      code: "corrupt",
      message: `the FLAC stream breaks in frame ${walk.frames} (from byte ${walk.lastStart}): its CRC-16 does not match; the file is truncated or damaged`,
    });
  } else if (declared !== 0 && walk.samples !== declared) {
    problems.push({
      code: "corrupt",
      message: `the FLAC frames hold ${walk.samples} samples but STREAMINFO declares ${declared}; the file is truncated or damaged`,
    });
  }
  stream.samples = walk.complete && declared !== 0 ? declared : walk.samples;
  return stream;
}

async function walkFrames(
  path: string,
  from: number,
  size: number,
  channels: number,
): Promise<{ frames: number; samples: number; complete: boolean; lastStart: number }> {
  const fh = await open(path, "r");
  let frames = 0;
  let samples = 0;
  let expected = 0;
  let crc = 0;
  let lastStart = from;
  try {
    // One buffer for the whole walk: the unscanned tail of the last read (a frame header may
    // straddle two reads) is moved to its start, and the next read fills the rest.
    const buf = Buffer.alloc(SCAN_CHUNK + MAX_FRAME_HEADER);
    let kept = 0;
    let base = from; // file offset of buf[0]
    let read = from;
    while (base < size) {
      const { bytesRead } = await fh.read(buf, kept, Math.min(SCAN_CHUNK, size - read), read);
      read += bytesRead;
      const filled = kept + bytesRead;
      const eof = read >= size || bytesRead === 0;
      const limit = eof ? filled : Math.max(0, filled - MAX_FRAME_HEADER);
      for (let i = 0; i < limit; i++) {
        const byte = buf[i] as number;
        if (byte === 0xff && i + 1 < filled && ((buf[i + 1] as number) & 0xfe) === 0xf8) {
          const h = frameHeader(buf.subarray(0, filled), i);
          const at = base + i;
          if (h && h.channels === channels) {
            const wanted = h.variable ? samples : expected;
            if (frames === 0 ? at === from : crc === 0 && h.number === wanted) {
              frames++;
              samples += h.blockSize;
              expected++;
              crc = 0;
              lastStart = at;
            }
          }
        }
        if (frames === 0) return { frames, samples, complete: false, lastStart };
        crc = (((crc << 8) & 0xffff) ^ (CRC16[(crc >> 8) ^ byte] as number)) & 0xffff;
      }
      buf.copy(buf, 0, limit, filled);
      kept = filled - limit;
      base += limit;
      if (eof) break;
    }
  } finally {
    await fh.close();
  }
  // The last frame runs to the end of the file (trailing garbage fails the check too).
  return { frames, samples, complete: frames > 0 && crc === 0, lastStart };
}

/**
 * The image library (libvips, tens of MB once loaded) is loaded when the first image is checked,
 * not at start: a server that never sees an upload never pays for it (docs/operations.md, "Memory").
 */
async function loadSharp(): Promise<typeof SharpFn> {
  return (await import("sharp")).default;
}
