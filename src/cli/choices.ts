/**
 * The value lists the commands' options offer, here so that defining the commands (for `--help`,
 * for parsing) loads none of the services behind them. choices.test.ts checks each list against
 * the module it comes from, so they cannot drift apart.
 */
export const POLICY_PRESETS = ["account-members", "owner-only"] as const;
export const ACCOUNT_KINDS = ["label", "artist"] as const;
export const MEMBERSHIP_ROLES = ["owner", "admin", "member", "viewer"] as const;
export const JOB_STATUSES = ["queued", "running", "succeeded", "dead"] as const;
export const SCOPES = [
  "catalog:read",
  "catalog:write",
  "royalties:read",
  "payouts:read",
  "webhooks:manage",
  "keys:manage",
] as const;
export const DEFAULT_SCOPES = ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage"] as const;
export const FORMAT_NAMES = ["backline", "streaming-monthly", "video-ugc", "ddex-dsr"] as const;
/** The formats `royalties sample` writes (src/royalties/sample.ts). */
export const SAMPLE_FORMATS = ["backline", "streaming-monthly", "video-ugc", "ddex-dsr"] as const;
export const STAFF_ROLES = ["reviewer", "operator", "admin"] as const;
