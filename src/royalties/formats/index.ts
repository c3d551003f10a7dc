import { backlineFormat } from "./backline.ts";
import { ddexDsrFormat } from "./ddex-dsr.ts";
import { streamingMonthlyFormat } from "./streaming-monthly.ts";
import type { RoyaltyFormat } from "./types.ts";
import { videoUgcFormat } from "./video-ugc.ts";

/** The report formats `backline royalties import --format` knows (docs/royalties.md). */
export const FORMATS: readonly RoyaltyFormat[] = [
  backlineFormat,
  streamingMonthlyFormat,
  videoUgcFormat,
  ddexDsrFormat,
];
export const FORMAT_NAMES = FORMATS.map((f) => f.name);

export function formatNamed(name: string): RoyaltyFormat | undefined {
  return FORMATS.find((f) => f.name === name);
}

export * from "./types.ts";
