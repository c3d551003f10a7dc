import path from "node:path";
import { ROOT } from "./process.ts";

/**
 * The steering repository's shared/ folder — DDEX's schemas and sample messages (ddex/ern43,
 * ddex/ern382, ddex/ernc-sftp18), DDEX's DSR files (ddex/dsr), store reports (samples/) — read
 * from there, never copied into this repository (their licences). BACKLINE_SHARED_DIR names it;
 * else it is ../shared beside the checkout. `.ci/run` sets it for a clone made in another folder.
 * A test that needs a shared file skips, saying why, when the file is missing — except under
 * CI=true, where it runs and fails, so that nothing is skipped silently in CI.
 */
export const SHARED_DIR = process.env.BACKLINE_SHARED_DIR
  ? path.resolve(process.env.BACKLINE_SHARED_DIR)
  : path.resolve(ROOT, "..", "shared");

export const sharedPath = (...parts: string[]): string => path.join(SHARED_DIR, ...parts);

/** Under CI a missing shared file fails the test that needs it instead of skipping it. */
export const SHARED_REQUIRED = process.env.CI === "true";
