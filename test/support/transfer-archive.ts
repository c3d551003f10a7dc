import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { zipSync } from "fflate";
import sharp from "sharp";
import { SHARED_DIR, SHARED_REQUIRED, sharedPath } from "./shared.ts";

/**
 * A previous distributor's ERN delivery as a zip (docs/catalogue.md, "An archive of ERN messages"),
 * built from DDEX's sample messages where they lie (the shared folder, test/support/shared.ts; never
 * copied into the repo) and
 * media made here: DDEX's ERN 4.3 single under `single/` (its FLAC named as a WAV, and the MD5 in
 * the message changed to the generated file's, since no file can be made to match the sample's),
 * and DDEX's complete ERN 3.8.2 album under `album/` with its six WAVs and its cover beside the
 * message, as its FileNames say (that message gives no checksums).
 */

export const SINGLE_MESSAGE = sharedPath("ddex", "ern43", "samples", "4 SimpleAudioSingle.xml");
export const ALBUM_MESSAGE = sharedPath("ddex", "ern382", "samples", "001_audioalbum_complete.xml");

/**
 * Why the tests built on these samples skip (they are not beside the checkout nor in
 * BACKLINE_SHARED_DIR), or false; under CI=true they run and fail instead (test/support/shared.ts).
 */
export const archiveSamplesSkip: string | false =
  [SINGLE_MESSAGE, ALBUM_MESSAGE].every((f) => existsSync(f)) || SHARED_REQUIRED
    ? false
    : `DDEX's sample messages are not in ${SHARED_DIR}`;

/** The single's main release has a GRid, no ICPN: it arrives without a UPC (said as no_upc). */
export const SINGLE = { title: "I Love You", isrcs: ["GBAYC1700598"] };
export const ALBUM = {
  title: "A Monkey Claw in a Velvet Glove",
  isrcs: ["CASE00000001", "CASE00000002", "CASE00000003", "CASE00000004", "CASE00000005", "CASE00000006"],
};

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");

/** A fifth of a second of 44.1 kHz stereo 16-bit audio, a quiet noise of its own per seed (not silence). */
export function wav(seed: number): Buffer {
  const frames = 8820;
  const data = frames * 4;
  const b = Buffer.alloc(44 + data);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + data, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(2, 22);
  b.writeUInt32LE(44100, 24);
  b.writeUInt32LE(44100 * 4, 28);
  b.writeUInt16LE(4, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(data, 40);
  let x = seed * 7919 + 1;
  for (let i = 0; i < frames * 2; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    b.writeInt16LE((x % 512) - 256, 44 + i * 2);
  }
  return b;
}

export interface ArchiveOptions {
  /** The single's audio differs from the MD5 its message gives. */
  mismatch?: boolean;
  /** Only the ERN 4.3 single (a smaller archive). */
  singleOnly?: boolean;
}

export async function ernDeliveryZip(options: ArchiveOptions = {}): Promise<Buffer> {
  const singleAudio = wav(1);
  const single = readFileSync(SINGLE_MESSAGE, "utf8")
    .replace("resources/190295810726_00001_LL.flac", "resources/190295810726_00001_LL.wav")
    .replace("db7dd2f3bb9b322646e3f4d7b65b47ab", options.mismatch ? md5(wav(99)) : md5(singleAudio));
  const enc = new TextEncoder();
  const files: Record<string, Uint8Array | [Uint8Array, { level: 0 | 6 }]> = {
    "single/4 SimpleAudioSingle.xml": enc.encode(single),
    "single/resources/190295810726_00001_LL.wav": singleAudio,
  };
  if (!options.singleOnly) {
    files["album/001_audioalbum_complete.xml"] = readFileSync(ALBUM_MESSAGE);
    for (let i = 1; i <= 6; i++) files[`album/A1UCASE0000000401X_01_0${i}.wav`] = wav(10 + i);
    const cover = await sharp({
      create: { width: 3000, height: 3000, channels: 3, background: { r: 180, g: 40, b: 90 } },
    })
      .jpeg({ quality: 80 })
      .toBuffer();
    files["album/A1UCASE0000000401X.jpeg"] = [cover, { level: 0 }];
  }
  return Buffer.from(zipSync(files));
}

/** An archive that would write outside its folder (zip-slip). */
export function zipSlipArchive(): Buffer {
  return Buffer.from(
    zipSync({
      "delivery/message.xml": readFileSync(SINGLE_MESSAGE),
      "../../../tmp/backline-zip-slip.txt": new TextEncoder().encode("escaped"),
    }),
  );
}

/** An archive with an entry that expands thousands of times (a zip bomb's mark). */
export function bombArchive(): Buffer {
  return Buffer.from(
    zipSync({
      "delivery/message.xml": readFileSync(SINGLE_MESSAGE),
      "delivery/resources/190295810726_00001_LL.flac": [new Uint8Array(32 * 1024 * 1024), { level: 9 }],
    }),
  );
}

/** The start of a good archive cut off, then junk: not readable as a zip. */
export async function corruptArchive(): Promise<Buffer> {
  const good = await ernDeliveryZip({ singleOnly: true });
  return Buffer.concat([
    good.subarray(0, Math.floor(good.length / 2)),
    Buffer.from("not the rest of the zip"),
  ]);
}
