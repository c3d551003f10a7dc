import { z } from "zod";

/**
 * The bodies of the admin API's decisions: strict JSON objects (an unknown field is refused, not
 * ignored: a typo must not pass for a decision). The routes' specs (spec.ts) parse them, with
 * parseJsonBody, and their path ids.
 */

const REASON = z.string().min(1).max(2000);

export const Bodies = {
  /** Approving a release, retrying deliveries: nothing to say (the body may be left out). */
  empty: z.strictObject({}),
  reject: z.strictObject({ reason: REASON }),
  oacApprove: z.strictObject({ note: z.string().max(2000).optional() }),
  report: z.discriminatedUnion("status", [
    z.strictObject({ status: z.literal("live") }),
    z.strictObject({ status: z.literal("error"), message: REASON }),
    // A takedown the store confirmed, recorded by hand: who confirmed it, and how.
    z.strictObject({ status: z.literal("taken_down"), note: z.string().trim().min(1).max(2000) }),
  ]),
  void: z.strictObject({ reason: z.string().trim().min(1).max(2000) }),
};
