import { z } from "zod";

/**
 * A tenant's auth settings: the `auth` object of internal.tenants.settings, with defaults. The operator sets
 * them per tenant (docs/auth.md); the development tenant turns e-mail confirmation off.
 */
const limit = z.object({ max: z.number().int().min(1), windowSeconds: z.number().int().min(1) });

const schema = z.object({
  email_confirmation: z.boolean().default(true),
  disable_signup: z.boolean().default(false),
  jwt_expiry: z
    .number()
    .int()
    .min(30)
    .max(7 * 24 * 3600)
    .default(3600),
  password_min_length: z.number().int().min(6).max(128).default(8),
  password_require_mixed: z.boolean().default(false),
  /** Where links in e-mails lead when the request gives no redirect_to. */
  site_url: z.url().optional(),
  /** Further addresses links may lead to: exact URLs, or prefixes ending in '*'. */
  redirect_urls: z.array(z.string()).default([]),
  otp_expiry: z
    .number()
    .int()
    .min(60)
    .max(7 * 24 * 3600)
    .default(3600),
  /**
   * Wrong codes before a code stops working, whatever the client address (docs/security.md,
   * "Guessing codes"): per e-mail address, the address's outstanding e-mailed codes are void after
   * this many wrong ones (a newly mailed code starts the count again); per MFA challenge, the
   * challenge is void.
   */
  max_code_attempts: z.number().int().min(1).max(20).default(5),
  /**
   * Anonymous sign-ins (supabase-js signInAnonymously): off unless turned on. An anonymous user
   * belongs to no account until it adds and proves an e-mail address (docs/auth.md).
   */
  anonymous_users: z.boolean().default(false),
  /**
   * Seconds between two mails of a kind that a user asks for again (resend, reauthenticate):
   * GoTrue's per-address interval, 60 s by default.
   */
  mail_interval_seconds: z.number().int().min(0).max(3600).default(60),
  /**
   * A password change from a session signed in more than 24 hours ago needs a reauthentication
   * code (supabase-js reauthenticate, then updateUser({ password, nonce })), as GoTrue's
   * "secure password change".
   */
  secure_password_change: z.boolean().default(false),
  /**
   * Passkeys (supabase-js auth.passkey, signInWithPasskey): off unless turned on (docs/auth.md,
   * "Passkeys"). `passkey_rp_id` names the relying party (a host name: the passkeys then work on
   * that host and every host under it); without it, the host of the tenant's page that asks.
   */
  passkeys: z.boolean().default(false),
  passkey_rp_id: z
    .string()
    .regex(/^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/)
    .optional(),
  /**
   * Linking and unlinking identities by a signed-in user (supabase-js linkIdentity,
   * unlinkIdentity): off unless turned on, as GoTrue's manual linking (docs/auth.md).
   */
  manual_linking: z.boolean().default(false),
  rate_limits: z
    .object({
      /** Password sign-ins from one client address, whatever the e-mail address. */
      signin_per_ip: limit.default({ max: 30, windowSeconds: 300 }),
      /** Password sign-ins for one e-mail address from one client address. */
      signin_per_email_ip: limit.default({ max: 10, windowSeconds: 300 }),
      /**
       * Password sign-ins for one e-mail address from client addresses that hold no session of its
       * user: the slower bound on distributed guessing. Above what one client address can reach
       * under signin_per_email_ip (12 windows of 10 an hour), so no single client locks a user out.
       */
      signin_per_email: limit.default({ max: 150, windowSeconds: 3600 }),
      signup_per_ip: limit.default({ max: 30, windowSeconds: 3600 }),
      /** Anonymous sign-ins from one client address (GoTrue's default: 30 an hour). */
      anonymous_per_ip: limit.default({ max: 30, windowSeconds: 3600 }),
      email_sent_per_address: limit.default({ max: 5, windowSeconds: 3600 }),
      verify_per_ip: limit.default({ max: 30, windowSeconds: 300 }),
      refresh_per_ip: limit.default({ max: 150, windowSeconds: 300 }),
      /** Attempts to verify a second factor (right or wrong) by one user: guessing a code is slow. */
      mfa_verify_per_user: limit.default({ max: 10, windowSeconds: 300 }),
    })
    .prefault({}),
});

export type AuthSettings = z.infer<typeof schema>;
/** The schema of `settings.auth`, for the commands that change it (`backline auth settings`). */
export const authSettingsSchema = schema;
export type RateLimitName = keyof AuthSettings["rate_limits"];

// Parsed once per tenant record: the directory caches the record, so an auth request (which
// reads the settings several times) parses nothing.
const parsedSettings = new WeakMap<object, AuthSettings>();

/** Reads the tenant's settings; a malformed value falls back to the default rather than locking users out. */
export function authSettings(tenantSettings: unknown): AuthSettings {
  const key = typeof tenantSettings === "object" && tenantSettings !== null ? tenantSettings : undefined;
  const cached = key && parsedSettings.get(key);
  if (cached) return cached;
  const raw = (tenantSettings as { auth?: unknown } | null)?.auth ?? {};
  const parsed = schema.safeParse(raw);
  const settings = parsed.success ? parsed.data : schema.parse({});
  if (key) parsedSettings.set(key, settings);
  return settings;
}

/** Whether an e-mail link may send the browser to `url`: the site URL's origin, or an allowed address. */
export function redirectAllowed(settings: AuthSettings, url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return false;
  if (settings.site_url && parsed.origin === new URL(settings.site_url).origin) return true;
  return settings.redirect_urls.some((allowed) =>
    allowed.endsWith("*") ? url.startsWith(allowed.slice(0, -1)) : url === allowed,
  );
}
