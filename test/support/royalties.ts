import fs from "node:fs";
import path from "node:path";
import type { Db } from "../../src/db/db.ts";
import type { Account } from "../../src/tenancy/tenants.ts";
import { type SeededRelease, type SeedTrack, seedRelease } from "./ddex.ts";
import { ROOT, tempDir } from "./process.ts";
import { forceReleaseStatus } from "./seed.ts";

/** The catalog the sample reports in docs/formats/ are about (docs/royalties.md, "Samples"). */
export const SAMPLES = {
  backline: path.join(ROOT, "docs/formats/backline.csv"),
  "streaming-monthly": path.join(ROOT, "docs/formats/streaming-monthly.csv"),
  "video-ugc": path.join(ROOT, "docs/formats/video-ugc.csv"),
};

export interface SampleCatalog {
  nightDrive: string;
  daybreak: string;
  tracks: Record<string, string>;
}

/**
 * A release as seedRelease makes it, then moved to `status` (default delivered): an import matches
 * only releases that went to the stores (delivered, live, takedown_requested, taken_down).
 */
export async function seedDeliveredRelease(
  db: Db,
  accountId: string,
  release: Record<string, unknown>,
  tracks: SeedTrack[],
  status = "delivered",
): Promise<SeededRelease> {
  const r = await seedRelease(db, accountId, release, tracks);
  await forceReleaseStatus(db, r.id, status);
  return r;
}

/** Night Drive (UPC 012345000010: QZABC2600001, QZABC2600002) and Daybreak (012345000027: QZABC2600003),
 * both delivered. */
export async function seedSampleCatalog(db: Db, account: Account): Promise<SampleCatalog> {
  const track = (title: string, isrc: string, n: number): SeedTrack => ({
    title,
    isrc,
    duration: 200,
    track_number: n,
  });
  const a = await seedDeliveredRelease(db, account.id, { title: "Night Drive", upc: "012345000010" }, [
    track("Night Drive", "QZABC2600001", 1),
    track("Neon", "QZABC2600002", 2),
  ]);
  const b = await seedDeliveredRelease(db, account.id, { title: "Daybreak", upc: "012345000027" }, [
    track("Sunrise", "QZABC2600003", 1),
  ]);
  const tracks: Record<string, string> = {};
  for (const t of [...a.tracks, ...b.tracks]) tracks[t.isrc] = t.id;
  return { nightDrive: a.id, daybreak: b.id, tracks };
}

/** Writes `text` to a new temporary file and returns its path. */
export function reportFile(text: string | Buffer, name = "report.csv"): string {
  const file = path.join(tempDir("backline-royalties-"), name);
  fs.writeFileSync(file, text);
  return file;
}

export async function countLines(db: Db, tenantId: string): Promise<number> {
  const r = await db.asService((tx) =>
    tx.query<{ n: number }>("select count(*)::int as n from internal.royalty_lines where tenant_id = $1", [
      tenantId,
    ]),
  );
  return r.rows[0]?.n ?? 0;
}
