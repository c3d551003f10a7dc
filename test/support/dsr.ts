import fs from "node:fs";
import path from "node:path";
import { SHARED_REQUIRED, sharedPath } from "./shared.ts";

/**
 * The real DDEX DSR flat files of shared/ddex/dsr/ (test/support/shared.ts; or DDEX_DSR_DIR), read from there, never
 * copied into the repository. Without them the tests that need them skip with this reason;
 * under CI=true they fail instead.
 */
export const DSR_DIR = process.env.DDEX_DSR_DIR
  ? path.resolve(process.env.DDEX_DSR_DIR)
  : sharedPath("ddex", "dsr");

export const DSR_FILES = {
  unlimited:
    "DSR_PADPIDA00123456743_PADPIDA0123456766K_UnlimitedMusicMonthly_2020-06-01--2020-06-30__1of1_20200703T075930.tsv",
  adFunded:
    "DSR_PADPIDA2015999999X_PADPIDA2015999999X_AdFunded_2015-08-01--2015-08-31__1of1_20151123T182957.tsv",
  ugc10: "DSR_TEST_YouTube_AdSupport-music_2015-Q4_IS_1of1_20160121T150926.tsv",
  ugc11: "DSR_TEST2_YouTube_AdSupport-music_2015-Q4_IS_1of1_20160121T150926.tsv",
} as const;

const present = Object.values(DSR_FILES).every((f) => fs.existsSync(path.join(DSR_DIR, f)));
export const dsrMissingFails = !present && SHARED_REQUIRED;
export const dsrSkip: string | false = present
  ? false
  : `the DDEX DSR sample files are not at ${DSR_DIR}: set DDEX_DSR_DIR to test the ddex-dsr format against them`;

export const dsrPath = (name: keyof typeof DSR_FILES) => path.join(DSR_DIR, DSR_FILES[name]);
