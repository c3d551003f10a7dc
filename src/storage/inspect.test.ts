import assert from "node:assert/strict";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { after, before, describe, test } from "node:test";
import {
  artworkJpeg,
  artworkPng,
  FLAC_HEADER_BYTES,
  flac,
  wav,
  wavHeader,
  wavStream,
} from "../../test/support/media-fixtures.ts";
import {
  ARTWORK_LIMITS,
  AUDIO_LIMITS,
  CONTENT_TYPES,
  type Inspection,
  inspectArtwork,
  inspectAudio,
  PROBLEM_CODES,
  trackDurationOf,
} from "./inspect.ts";

let dir: string;
let counter = 0;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "backline-inspect-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes the bytes under a name that may lie about them (the inspection must not care). */
async function file(bytes: Buffer | Uint8Array, name = "upload.bin"): Promise<string> {
  const p = path.join(dir, `${counter++}-${name}`);
  await writeFile(p, bytes);
  return p;
}

const codes = (i: Inspection) => i.problems.map((p) => p.code).sort();
const garbage = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 251));
const text = Buffer.from("this is not a picture, just a note someone saved as cover.jpg\n".repeat(20));

type Case = {
  name: string;
  make: () => Buffer | Promise<Buffer>;
  filename?: string;
  declared?: string;
  codes: string[];
  metadata?: Record<string, unknown>;
};

const artworkCases: Case[] = [
  {
    name: "a valid 3000×3000 sRGB JPEG",
    make: () => artworkJpeg(),
    declared: "image/jpeg",
    codes: [],
    metadata: { format: "jpeg", width: 3000, height: 3000, color_space: "srgb", channels: 3 },
  },
  {
    name: "a valid 3000×3000 PNG",
    make: () => artworkPng(),
    declared: "image/png",
    codes: [],
    metadata: { format: "png", width: 3000, height: 3000, color_space: "srgb", channels: 3 },
  },
  {
    name: "a declared type with parameters and capitals",
    make: () => artworkJpeg(),
    declared: "Image/JPEG; charset=binary",
    codes: [],
  },
  {
    name: "too small (2000×2000)",
    make: () => artworkJpeg({ width: 2000, height: 2000 }),
    codes: ["too_small"],
  },
  {
    name: "not square (3000×3200)",
    make: () => artworkJpeg({ width: 3000, height: 3200 }),
    codes: ["not_square"],
  },
  {
    name: "too large and not square (10001×3000)",
    make: () => artworkJpeg({ width: 10001, height: 3000 }),
    codes: ["not_square", "too_large"],
  },
  {
    name: "small and not square at once",
    make: () => artworkPng({ width: 1200, height: 800 }),
    codes: ["not_square", "too_small"],
  },
  {
    name: "a CMYK JPEG",
    make: () => artworkJpeg({ space: "cmyk" }),
    codes: ["not_rgb"],
    metadata: { color_space: "cmyk", channels: 4 },
  },
  {
    name: "a greyscale JPEG",
    make: () => artworkJpeg({ space: "b-w" }),
    codes: ["not_rgb"],
    metadata: { color_space: "b-w", channels: 1 },
  },
  { name: "a greyscale PNG", make: () => artworkPng({ space: "b-w" }), codes: ["not_rgb"] },
  {
    name: "a PNG with alpha",
    make: () => artworkPng({ alpha: true }),
    codes: ["has_alpha"],
    metadata: { channels: 4 },
  },
  {
    name: "a truncated JPEG",
    make: async () => {
      const b = await artworkJpeg();
      return b.subarray(0, Math.floor(b.length / 2));
    },
    codes: ["corrupt"],
    metadata: { format: "jpeg", width: 3000, height: 3000 },
  },
  {
    name: "a truncated PNG",
    make: async () => {
      const b = await artworkPng();
      return b.subarray(0, Math.floor(b.length / 2));
    },
    codes: ["corrupt"],
  },
  { name: "a text file named .jpg", make: () => text, filename: "cover.jpg", codes: ["unsupported_format"] },
  {
    name: "a text file named .jpg, declared image/jpeg",
    make: () => text,
    filename: "cover.jpg",
    declared: "image/jpeg",
    codes: ["content_type_mismatch", "unsupported_format"],
  },
  {
    name: "a PNG declared as image/jpeg",
    make: () => artworkPng(),
    declared: "image/jpeg",
    codes: ["content_type_mismatch"],
  },
  {
    name: "a JPEG declared as application/octet-stream",
    make: () => artworkJpeg(),
    declared: "application/octet-stream",
    codes: ["content_type_mismatch"],
  },
  { name: "a WAV given as artwork", make: () => wav(), filename: "cover.png", codes: ["unsupported_format"] },
  { name: "garbage bytes", make: () => garbage, codes: ["unsupported_format"] },
  { name: "an empty file", make: () => Buffer.alloc(0), filename: "cover.jpg", codes: ["empty"] },
  {
    name: "a JPEG header and nothing else",
    make: () => Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46]),
    codes: ["unreadable"],
  },
];

/** The bytes of `flac()` with a 16-bit frame CRC broken in the middle of the stream. */
function flipped(b: Buffer, at: number): Buffer {
  const c = Buffer.from(b);
  c[at] = (c[at] as number) ^ 0x55;
  return c;
}

/** A WAV whose format tag says IEEE float. */
function floatWav(): Buffer {
  const b = wav({ bitDepth: 32 });
  b.writeUInt16LE(3, 20);
  return b;
}

const audioCases: Case[] = [
  {
    name: "a valid WAV, 16 bit 44.1 kHz stereo",
    make: () => wav(),
    declared: "audio/wav",
    codes: [],
    metadata: {
      format: "wav",
      codec: "PCM",
      sample_rate: 44100,
      bit_depth: 16,
      channels: 2,
      duration_seconds: 2,
    },
  },
  {
    name: "a valid WAV, 24 bit 48 kHz stereo",
    make: () => wav({ bitDepth: 24, sampleRate: 48000, seconds: 1.5 }),
    declared: "audio/x-wav",
    codes: [],
    metadata: { format: "wav", sample_rate: 48000, bit_depth: 24, channels: 2, duration_seconds: 1.5 },
  },
  {
    name: "a valid FLAC, 16 bit 44.1 kHz stereo",
    make: () => flac(),
    declared: "audio/flac",
    codes: [],
    metadata: {
      format: "flac",
      codec: "FLAC",
      sample_rate: 44100,
      bit_depth: 16,
      channels: 2,
      duration_seconds: 2,
    },
  },
  {
    name: "a valid FLAC, 24 bit 96 kHz stereo",
    make: () => flac({ bitDepth: 24, sampleRate: 96000, seconds: 1.25 }),
    declared: "audio/x-flac",
    codes: [],
    metadata: { sample_rate: 96000, bit_depth: 24, duration_seconds: 1.25 },
  },
  {
    name: "an 8-bit WAV",
    make: () => wav({ bitDepth: 8 }),
    codes: ["bit_depth"],
    metadata: { bit_depth: 8 },
  },
  { name: "a 22050 Hz WAV", make: () => wav({ sampleRate: 22050 }), codes: ["sample_rate"] },
  { name: "a 384 kHz WAV", make: () => wav({ sampleRate: 384000, seconds: 0.1 }), codes: ["sample_rate"] },
  { name: "a mono WAV", make: () => wav({ channels: 1 }), codes: ["channels"], metadata: { channels: 1 } },
  { name: "a 6-channel FLAC", make: () => flac({ channels: 6, seconds: 0.5 }), codes: ["channels"] },
  {
    name: "a mono 8-bit 22050 Hz WAV: three problems at once",
    make: () => wav({ channels: 1, bitDepth: 8, sampleRate: 22050 }),
    codes: ["bit_depth", "channels", "sample_rate"],
  },
  {
    name: "a mono 8-bit 22050 Hz FLAC declared as WAV: four problems at once",
    make: () => flac({ channels: 1, bitDepth: 8, sampleRate: 22050, seconds: 0.5 }),
    declared: "audio/wav",
    codes: ["bit_depth", "channels", "content_type_mismatch", "sample_rate"],
  },
  { name: "a float WAV", make: floatWav, codes: ["bit_depth", "unsupported_format"] },
  { name: "an empty file", make: () => Buffer.alloc(0), filename: "track.wav", codes: ["empty"] },
  {
    name: "a WAV with no samples",
    make: () => wavHeader({ dataBytes: 0 }),
    codes: ["empty"],
    metadata: { duration_seconds: 0 },
  },
  {
    name: "a truncated WAV (data chunk claims more than the file holds)",
    make: () => wav().subarray(0, 100_000),
    codes: ["corrupt"],
  },
  {
    name: "a WAV header only, claiming 1 MB of data",
    make: () => wavHeader({ dataBytes: 1_000_000 }),
    codes: ["corrupt"],
  },
  { name: "garbage bytes", make: () => garbage, filename: "track.flac", codes: ["unsupported_format"] },
  {
    name: "a text file declared audio/flac",
    make: () => text,
    declared: "audio/flac",
    codes: ["content_type_mismatch", "unsupported_format"],
  },
  {
    name: "a JPEG given as audio",
    make: () => artworkJpeg({ width: 100, height: 100 }),
    codes: ["unsupported_format"],
  },
  {
    name: "a FLAC with no frames after its metadata",
    make: () => flac().subarray(0, FLAC_HEADER_BYTES),
    codes: ["corrupt"],
  },
  { name: "a FLAC with no samples at all", make: () => flac({ seconds: 0 }), codes: ["empty"] },
  {
    name: "a FLAC without STREAMINFO",
    make: () => Buffer.concat([Buffer.from("fLaC"), Buffer.from([0x81, 0, 0, 8]), Buffer.alloc(8)]),
    codes: ["corrupt"],
  },
  {
    name: "a FLAC truncated in the middle of a frame",
    make: () => {
      const b = flac();
      return b.subarray(0, Math.floor(b.length / 2));
    },
    codes: ["corrupt"],
  },
  {
    name: "a FLAC truncated at a frame boundary (fewer samples than STREAMINFO declares)",
    make: () => {
      const b = flac({ seconds: 1 });
      // Frames of 4096 stereo 16-bit VERBATIM samples: 5 header + 1 CRC-8 + 2×(1 + 8192) + 2 CRC-16.
      return b.subarray(0, FLAC_HEADER_BYTES + 3 * (6 + 2 * 8193 + 2));
    },
    codes: ["corrupt"],
  },
  { name: "a FLAC with a damaged byte", make: () => flipped(flac(), 100_000), codes: ["corrupt"] },
  { name: "a FLAC with garbage appended", make: () => Buffer.concat([flac(), garbage]), codes: ["corrupt"] },
  {
    name: "a WAV declared as audio/flac",
    make: () => wav(),
    declared: "audio/flac",
    codes: ["content_type_mismatch"],
  },
];

describe("inspectArtwork", () => {
  for (const c of artworkCases) {
    test(c.name, async () => {
      const p = await file(await c.make(), c.filename);
      const result = await inspectArtwork(p, c.declared);
      assert.deepEqual(codes(result), [...c.codes].sort(), JSON.stringify(result.problems));
      assert.equal(result.valid, c.codes.length === 0);
      for (const [k, v] of Object.entries(c.metadata ?? {})) assert.equal(result.metadata[k], v, k);
      for (const problem of result.problems) assert.ok(problem.message.length > 20, problem.message);
    });
  }

  test("messages say what was found and what is needed", async () => {
    const p = await file(await artworkJpeg({ width: 2000, height: 2000 }));
    const { problems, metadata } = await inspectArtwork(p);
    assert.equal(problems[0]?.message, "the image is 2000×2000 pixels; artwork must be at least 3000×3000");
    assert.equal(metadata.bytes, (await artworkJpeg({ width: 2000, height: 2000 })).length);
  });
});

describe("inspectAudio", () => {
  for (const c of audioCases) {
    test(c.name, async () => {
      const p = await file(await c.make(), c.filename);
      const result = await inspectAudio(p, c.declared);
      assert.deepEqual(codes(result), [...c.codes].sort(), JSON.stringify(result.problems));
      assert.equal(result.valid, c.codes.length === 0);
      for (const [k, v] of Object.entries(c.metadata ?? {})) assert.equal(result.metadata[k], v, k);
      for (const problem of result.problems) assert.ok(problem.message.length > 20, problem.message);
    });
  }

  test("the duration is measured to within 10 ms, for WAV and FLAC", async () => {
    for (const seconds of [0.75, 1.234, 3.3]) {
      for (const [kind, bytes] of [
        ["wav", wav({ seconds, sampleRate: 48000, bitDepth: 24 })],
        ["flac", flac({ seconds, sampleRate: 44100 })],
      ] as const) {
        const { metadata, valid } = await inspectAudio(await file(bytes));
        assert.ok(valid, kind);
        const d = metadata.duration_seconds as number;
        assert.ok(Math.abs(d - seconds) <= 0.01, `${kind} ${seconds}s measured ${d}s`);
      }
    }
  });

  test("trackDurationOf rounds to whole seconds, at least 1", () => {
    assert.equal(trackDurationOf({ duration_seconds: 2.4 }), 2);
    assert.equal(trackDurationOf({ duration_seconds: 2.5 }), 3);
    assert.equal(trackDurationOf({ duration_seconds: 0.2 }), 1);
    assert.equal(trackDurationOf({ duration_seconds: 0 }), undefined);
    assert.equal(trackDurationOf({}), undefined);
  });

  test("messages say what was found and what is needed", async () => {
    const { problems } = await inspectAudio(await file(wav({ channels: 1, bitDepth: 8, sampleRate: 22050 })));
    const messages = problems.map((p) => p.message).sort();
    assert.deepEqual(messages, [
      "the audio is 8-bit; audio must be 16-bit or 24-bit",
      "the audio is mono (1 channel); audio must be stereo (2 channels)",
      "the audio is sampled at 22050 Hz; audio must be sampled at 44100 Hz or more",
    ]);
  });

  test("a WAV streamed to disk by wavStream is valid and as long as asked", async () => {
    const p = path.join(dir, "streamed.wav");
    const total = 32 * 1024 * 1024;
    await pipeline(wavStream(total), createWriteStream(p));
    const { valid, metadata } = await inspectAudio(p, "audio/wave");
    assert.ok(valid);
    assert.ok(total - (metadata.bytes as number) < 4 && (metadata.bytes as number) <= total);
    assert.ok(Math.abs((metadata.duration_seconds as number) - (total - 44) / 176400) < 0.001);
  });

  test("a missing path throws; it is an I/O error, not a bad file", async () => {
    await assert.rejects(inspectAudio(path.join(dir, "nope.wav")), { code: "ENOENT" });
    await assert.rejects(inspectArtwork(path.join(dir, "nope.jpg")), { code: "ENOENT" });
    await assert.rejects(inspectArtwork(dir));
  });
});

test("the constants docs and tests rely on", () => {
  assert.ok(PROBLEM_CODES.includes("content_type_mismatch"));
  assert.equal(new Set(PROBLEM_CODES).size, PROBLEM_CODES.length);
  assert.equal(ARTWORK_LIMITS.minSide, 3000);
  assert.equal(AUDIO_LIMITS.minSampleRate, 44100);
  assert.deepEqual(CONTENT_TYPES.wav, ["audio/wav", "audio/x-wav", "audio/wave"]);
  const used = new Set([...artworkCases, ...audioCases].flatMap((c) => c.codes));
  for (const code of PROBLEM_CODES) assert.ok(used.has(code), `no test case reports ${code}`);
});
