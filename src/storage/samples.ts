import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { Sharp } from "sharp";
import sharp from "sharp";
import { crc8, crc16 } from "./inspect.ts";

/**
 * Sample media for tests and for trying an upload (`backline media samples`), made here (sharp for images, TypeScript for audio) — no binaries from
 * outside. Artwork is a smooth gradient, so a 3000×3000 JPEG is ~110 KB. Audio is a quiet 440 Hz
 * tone (-20 dBFS). The FLAC writer emits a real stream (STREAMINFO with total samples, block and
 * frame sizes and the MD5 of the samples; frames of VERBATIM subframes with CRC-8/CRC-16) that
 * `flac -t` accepts.
 */

export type ArtworkOptions = {
  width?: number;
  height?: number;
  /** JPEG: srgb (default), cmyk or b-w (greyscale). PNG: srgb or b-w. */
  space?: "srgb" | "cmyk" | "b-w";
};

function gradient(opts: ArtworkOptions): Sharp {
  const width = opts.width ?? 3000;
  const height = opts.height ?? 3000;
  // Four corner colours, stretched: a smooth gradient that compresses well.
  const corners = Buffer.from([200, 40, 40, 40, 180, 60, 40, 60, 200, 230, 210, 50]);
  const img = sharp(corners, { raw: { width: 2, height: 2, channels: 3 } }).resize(width, height, {
    fit: "fill",
    kernel: "cubic",
  });
  if (opts.space === "cmyk") return img.toColourspace("cmyk");
  if (opts.space === "b-w") return img.toColourspace("b-w");
  return img;
}

export function artworkJpeg(opts: ArtworkOptions = {}): Promise<Buffer> {
  return gradient(opts).jpeg({ quality: 80 }).toBuffer();
}

export function artworkPng(
  opts: Omit<ArtworkOptions, "space"> & { space?: "srgb" | "b-w"; alpha?: boolean } = {},
) {
  const img = gradient(opts);
  return (opts.alpha ? img.ensureAlpha(0.5) : img).png({ compressionLevel: 9 }).toBuffer();
}

export type AudioOptions = {
  sampleRate?: number;
  bitDepth?: number;
  channels?: number;
  seconds?: number;
};

type Format = { sampleRate: number; bitDepth: number; channels: number; seconds: number };

function format(opts: AudioOptions): Format {
  return {
    sampleRate: opts.sampleRate ?? 44100,
    bitDepth: opts.bitDepth ?? 16,
    channels: opts.channels ?? 2,
    seconds: opts.seconds ?? 2,
  };
}

/** The signed value of sample `n` of the tone at this bit depth (the same on every channel). */
function toneSample(n: number, f: Format): number {
  const amplitude = 0.1 * (2 ** (f.bitDepth - 1) - 1);
  return Math.round(amplitude * Math.sin((2 * Math.PI * 440 * n) / f.sampleRate));
}

const bytesPerSample = (bitDepth: number) => Math.ceil(bitDepth / 8);

/** Little-endian sample bytes as in a WAV (8-bit unsigned, wider signed). */
function writeLE(buf: Buffer, at: number, value: number, bitDepth: number): void {
  const width = bytesPerSample(bitDepth);
  if (width === 1) buf.writeUInt8(value + 128, at);
  else buf.writeIntLE(value, at, width);
}

/** A canonical 44-byte PCM WAV header announcing `dataBytes` bytes of samples. */
export function wavHeader(opts: AudioOptions & { dataBytes: number }): Buffer {
  const f = format(opts);
  const blockAlign = f.channels * bytesPerSample(f.bitDepth);
  const h = Buffer.alloc(44);
  h.write("RIFF", 0, "latin1");
  h.writeUInt32LE(Math.min(0xffffffff, 36 + opts.dataBytes), 4);
  h.write("WAVEfmt ", 8, "latin1");
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(f.channels, 22);
  h.writeUInt32LE(f.sampleRate, 24);
  h.writeUInt32LE(f.sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(f.bitDepth, 34);
  h.write("data", 36, "latin1");
  h.writeUInt32LE(opts.dataBytes, 40);
  return h;
}

/** Interleaved little-endian sample bytes for frames [from, from + frames). */
function pcm(f: Format, from: number, frames: number): Buffer {
  const width = bytesPerSample(f.bitDepth);
  const buf = Buffer.alloc(frames * f.channels * width);
  let at = 0;
  for (let n = 0; n < frames; n++) {
    const v = toneSample(from + n, f);
    for (let c = 0; c < f.channels; c++, at += width) writeLE(buf, at, v, f.bitDepth);
  }
  return buf;
}

/** A PCM WAV with a quiet tone; default 44100 Hz, 16 bit, stereo, 2 seconds. */
export function wav(opts: AudioOptions = {}): Buffer {
  const f = format(opts);
  const data = pcm(f, 0, Math.round(f.seconds * f.sampleRate));
  return Buffer.concat([wavHeader({ ...f, dataBytes: data.length }), data]);
}

/**
 * A valid WAV of about `totalBytes` bytes (44-byte header, data rounded down to whole sample
 * frames), produced one chunk at a time: the tone's samples for one second are made once and
 * repeated, so memory stays small whatever the size (for the 500 MB upload test).
 */
export function wavStream(totalBytes: number, opts: AudioOptions = {}): Readable {
  const f = format(opts);
  const blockAlign = f.channels * bytesPerSample(f.bitDepth);
  const dataBytes = Math.floor(Math.max(0, totalBytes - 44) / blockAlign) * blockAlign;
  // One second at 440 Hz is a whole number of periods for the usual rates, so repeats are seamless.
  const second = pcm(f, 0, f.sampleRate);
  function* chunks(): Generator<Buffer> {
    yield wavHeader({ ...f, dataBytes });
    let left = dataBytes;
    while (left > 0) {
      const piece = left >= second.length ? second : second.subarray(0, left);
      left -= piece.length;
      yield piece;
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

// FLAC ----------------------------------------------------------------------------------------

class BitWriter {
  private bytes: number[] = [];
  private acc = 0;
  private n = 0;

  /** Writes the low `bits` bits of `value` (two's complement for negatives), most significant first. */
  write(value: number, bits: number): void {
    for (let i = bits - 1; i >= 0; i--) {
      const bit = i >= 32 ? Math.floor(value / 2 ** i) & 1 : (value >>> i) & 1;
      this.acc = (this.acc << 1) | bit;
      if (++this.n === 8) {
        this.bytes.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
  }

  /** Pads with zero bits to a byte boundary. */
  align(): void {
    if (this.n > 0) this.write(0, 8 - this.n);
  }

  toBuffer(): Buffer {
    this.align();
    return Buffer.from(this.bytes);
  }
}

const RATE_CODES: Record<number, number> = {
  88200: 1,
  176400: 2,
  192000: 3,
  8000: 4,
  16000: 5,
  22050: 6,
  24000: 7,
  32000: 8,
  44100: 9,
  48000: 10,
  96000: 11,
};
const DEPTH_CODES: Record<number, number> = { 8: 1, 12: 2, 16: 4, 20: 5, 24: 6, 32: 7 };
const BLOCK_SIZE = 4096;

/** UTF-8 coding of a frame number, as in FLAC frame headers (up to 36 bits). */
function utf8Number(n: number): number[] {
  if (n < 0x80) return [n];
  const out: number[] = [];
  let bytes = 2;
  while (n >= 2 ** (5 * bytes + 1)) bytes++;
  let rest = n;
  for (let k = 0; k < bytes - 1; k++) {
    out.unshift(0x80 | (rest & 0x3f));
    rest = Math.floor(rest / 64);
  }
  out.unshift(((0xff00 >> bytes) & 0xff) | rest);
  return out;
}

function frame(f: Format, number: number, first: number, size: number): Buffer {
  const header = [0xff, 0xf8];
  const sizeCode = size === BLOCK_SIZE ? 12 : size <= 256 ? 6 : 7;
  header.push((sizeCode << 4) | (RATE_CODES[f.sampleRate] ?? 0));
  header.push(((f.channels - 1) << 4) | ((DEPTH_CODES[f.bitDepth] ?? 0) << 1));
  header.push(...utf8Number(number));
  if (sizeCode === 6) header.push(size - 1);
  if (sizeCode === 7) header.push((size - 1) >> 8, (size - 1) & 0xff);
  const head = Buffer.from(header);
  const w = new BitWriter();
  for (let c = 0; c < f.channels; c++) {
    w.write(0, 1); // zero padding
    w.write(0b000001, 6); // VERBATIM
    w.write(0, 1); // no wasted bits
    for (let n = 0; n < size; n++) w.write(toneSample(first + n, f), f.bitDepth);
  }
  const body = w.toBuffer();
  const out = Buffer.alloc(head.length + 1 + body.length + 2);
  head.copy(out, 0);
  out[head.length] = crc8(head);
  body.copy(out, head.length + 1);
  out.writeUInt16BE(crc16(out, 0, out.length - 2), out.length - 2);
  return out;
}

/** The FLAC MD5 signature: of the samples interleaved, signed, little-endian, in whole bytes. */
function md5(f: Format, total: number): Buffer {
  const hash = createHash("md5");
  const width = bytesPerSample(f.bitDepth);
  const step = 65536;
  for (let from = 0; from < total; from += step) {
    const frames = Math.min(step, total - from);
    const buf = Buffer.alloc(frames * f.channels * width);
    let at = 0;
    for (let n = 0; n < frames; n++) {
      const v = toneSample(from + n, f);
      for (let c = 0; c < f.channels; c++, at += width) buf.writeIntLE(v, at, width);
    }
    hash.update(buf);
  }
  return hash.digest();
}

/**
 * A valid FLAC stream (RFC 9639) of the tone: "fLaC", STREAMINFO, then frames of 4096 samples made
 * of VERBATIM subframes (independent channels). Default 44100 Hz, 16 bit, stereo, 2 seconds.
 * `flac().subarray(0, FLAC_HEADER_BYTES)` is the metadata alone, without any frame.
 */
export function flac(opts: AudioOptions = {}): Buffer {
  const f = format(opts);
  const total = Math.round(f.seconds * f.sampleRate);
  const frames: Buffer[] = [];
  for (let first = 0, number = 0; first < total; first += BLOCK_SIZE, number++) {
    frames.push(frame(f, number, first, Math.min(BLOCK_SIZE, total - first)));
  }
  const block = total === 0 ? BLOCK_SIZE : Math.min(BLOCK_SIZE, total);
  const sizes = frames.map((b) => b.length);
  const info = new BitWriter();
  info.write(block, 16); // minimum block size (the last block may be smaller)
  info.write(block, 16); // maximum block size
  info.write(sizes.length ? Math.min(...sizes) : 0, 24);
  info.write(sizes.length ? Math.max(...sizes) : 0, 24);
  info.write(f.sampleRate, 20);
  info.write(f.channels - 1, 3);
  info.write(f.bitDepth - 1, 5);
  info.write(total, 36);
  const streaminfo = Buffer.concat([info.toBuffer(), md5(f, total)]);
  const blockHeader = Buffer.from([0x80, 0, 0, streaminfo.length]); // last metadata block, type 0
  return Buffer.concat([Buffer.from("fLaC", "latin1"), blockHeader, streaminfo, ...frames]);
}

/** Bytes before the first frame of `flac()`: "fLaC", a block header and the 34-byte STREAMINFO. */
export const FLAC_HEADER_BYTES = 42;
