/**
 * The portal's one door to Backline (docs/portal.md): supabase-js for /auth/v1 and /rest/v1 —
 * row security decides what the member sees — and, with the same token, the portal's two files
 * (GET /portal/tenant.json, GET /portal/accounts.json). Pages call these functions; they never
 * build URLs or read error bodies themselves. Every failure comes out as a `PlainError`: words a
 * person can act on, and the field they belong to.
 */
import { createClient, type Session, type SupabaseClient } from "@supabase/supabase-js";

export interface Branding {
  display_name: string;
  logo_url: string | null;
  primary_color: string | null;
  support_email: string | null;
  /** The tenant's custom CSS (GET /brand/<tenant>/custom.css?v=…), loaded after the portal's own. */
  custom_css_url: string | null;
}

export interface PortalTenant {
  id: string;
  slug: string;
  name: string;
  anon_key: string;
  via: "domain" | "slug" | "development";
  portal_url: string;
  branding: Branding;
  signup: boolean;
  /** Whether the tenant turned passkeys on: the sign-in page shows its passkey button. */
  passkeys?: boolean;
}

/** A form field a failure can belong to: `email`, `title`, or a public API param (`tracks[0].isrc`). */
export type Field = string;

/**
 * A failure in plain words; `field` when it is about one field of the form, `fields` when the
 * server named several (each with its own words), `problems` the server's list as it came.
 */
export class PlainError extends Error {
  readonly field: Field | undefined;
  readonly fields: Readonly<Record<Field, string>>;
  readonly problems: readonly { param: string; code: string; message: string }[];
  readonly code: string;
  readonly status: number | undefined;
  constructor(
    message: string,
    options: {
      field?: Field;
      fields?: Record<Field, string>;
      problems?: { param: string; code: string; message: string }[];
      code?: string;
      status?: number;
    } = {},
  ) {
    super(message);
    this.name = "PlainError";
    this.field = options.field;
    this.fields = options.fields ?? (options.field ? { [options.field]: message } : {});
    this.problems = options.problems ?? [];
    this.code = options.code ?? "error";
    this.status = options.status;
  }
}

// ---------------------------------------------------------------------------------------------
// The tenant, from the address the portal was opened at

/** `/portal/t/<slug>/…` names a tenant; `/portal/…` leaves it to the host name or the default. */
export function slugInPath(pathname: string): string | undefined {
  const m = /^\/portal\/t\/([a-z0-9][a-z0-9-]{0,62})(?:\/|$)/.exec(pathname);
  return m?.[1];
}

/** How often the start asks again while the server is busy (503, 429) or unreachable. */
const START_TRIES = 6;

/**
 * The tenant this address shows, or null when there is no portal here (404 no_portal). A busy
 * server (503 or 429, as admission control answers under load) or a dropped connection is asked
 * again, after its Retry-After or a growing pause, before the page says it could not start.
 */
export async function loadTenant(slug: string | undefined): Promise<PortalTenant | null> {
  // The server writes its answer into the start page (src/console/static.ts): no round trip.
  const given = document.getElementById("backline-start")?.textContent;
  if (given) {
    try {
      return JSON.parse(given) as PortalTenant | null;
    } catch {
      // Asked for below, as when the page carries nothing.
    }
  }
  const query = slug ? `?slug=${encodeURIComponent(slug)}` : "";
  let response: Response | undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      response = await fetch(`/portal/tenant.json${query}`, { headers: { accept: "application/json" } });
    } catch {
      response = undefined;
    }
    const busy = response === undefined || response.status === 503 || response.status === 429;
    if (!busy || attempt >= START_TRIES) break;
    const retryAfter = Number(response?.headers.get("retry-after"));
    const waitMs =
      Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter, 5) * 1000 : 500 * attempt;
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
  if (!response) {
    throw new PlainError("The server could not be reached. Check your connection and reload the page.");
  }
  if (response.status === 404 || response.status === 400) return null;
  if (!response.ok) throw new PlainError("The portal could not start. Reload the page in a moment.");
  return (await response.json()) as PortalTenant;
}

// ---------------------------------------------------------------------------------------------
// supabase-js, one client per tenant

let tenant: PortalTenant | undefined;
let client: SupabaseClient | undefined;
let base = "/portal";

export function startClient(t: PortalTenant, appBase: string): SupabaseClient {
  tenant = t;
  base = appBase;
  client = createClient(location.origin, t.anon_key, {
    auth: {
      // One session per tenant on this browser: the same browser may be a member on two tenants.
      storageKey: `backline-portal-${t.id}`,
      persistSession: true,
      autoRefreshToken: true,
      // The portal reads a mailed link's fragment itself (AuthCallback), to say what happened.
      detectSessionInUrl: false,
      flowType: "implicit",
      // auth.passkey, signInWithPasskey and registerPasskey (docs/portal.md, "Passkeys").
      experimental: { passkey: true },
    },
  });
  return client;
}

/** Whether this browser holds a session for the tenant (supabase-js's storage): a member is back. */
export function hasStoredSession(): boolean {
  try {
    return tenant !== undefined && localStorage.getItem(`backline-portal-${tenant.id}`) !== null;
  } catch {
    return false;
  }
}

function sb(): SupabaseClient {
  if (!client) throw new Error("startClient first");
  return client;
}

export function currentTenant(): PortalTenant {
  if (!tenant) throw new Error("startClient first");
  return tenant;
}

/** Where a mailed link brings the reader back to: this portal, at this address. */
function callbackUrl(): string {
  return `${location.origin}${base}/auth/callback`;
}

// ---------------------------------------------------------------------------------------------
// The session, as a store React subscribes to

export interface SessionState {
  ready: boolean;
  session: Session | null;
}

let state: SessionState = { ready: false, session: null };
const listeners = new Set<() => void>();

function set(next: SessionState) {
  state = next;
  for (const l of listeners) l();
}

export function watchSession(): void {
  sb().auth.onAuthStateChange((_event, session) => {
    // A refresh hands out a new token: keep the same object when nothing that matters changed.
    if (state.ready && state.session?.access_token === session?.access_token) return;
    set({ ready: true, session });
  });
}

export const session = {
  get: (): SessionState => state,
  subscribe(listener: () => void): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
};

// ---------------------------------------------------------------------------------------------
// Errors in plain words

interface ErrorLike {
  code?: unknown;
  status?: unknown;
  message?: unknown;
  name?: unknown;
  details?: unknown;
  hint?: unknown;
}

function plain(
  error: unknown,
  context: "sign-in" | "sign-up" | "code" | "password" | "data" | "passkey" | "passkey-add",
): PlainError {
  if (error instanceof PlainError) return error;
  const e = (error ?? {}) as ErrorLike;
  const code = typeof e.code === "string" ? e.code : "";
  const status = typeof e.status === "number" ? e.status : undefined;
  const name = typeof e.name === "string" ? e.name : "";
  const support = tenant?.branding.support_email;
  const ask = support ? ` If it keeps happening, write to ${support}.` : "";
  if (
    error instanceof TypeError ||
    ((name === "AuthRetryableFetchError" || status === 0) && !(status && status >= 500))
  )
    return new PlainError("The server could not be reached. Check your connection and try again.", {
      code: "network",
    });
  // The browser's answer when the person closes the passkey prompt or lets it time out.
  if (name === "NotAllowedError" || name === "AbortError")
    return new PlainError("The passkey prompt was closed or timed out. Try again.", { code: "aborted" });
  if (status === 503 || status === 429)
    return new PlainError("The server is busy right now. Wait a moment, then try again.", {
      code: "busy",
      status,
    });
  const by = (message: string, field?: Field) =>
    new PlainError(message, { ...(field ? { field } : {}), code, ...(status ? { status } : {}) });
  switch (code) {
    case "invalid_credentials":
      return by(
        "That e-mail address and password do not match. Check both, or reset your password.",
        "password",
      );
    case "email_not_confirmed":
      return by("Confirm your e-mail address first: open the link in the e-mail we sent you.", "email");
    case "email_address_invalid":
      return by("Enter an e-mail address such as name@example.com.", "email");
    case "user_already_exists":
    case "email_exists":
      return by(
        "There is already an account with this e-mail address. Sign in, or reset your password.",
        "email",
      );
    case "weak_password":
      return by("Choose a longer password: at least 8 characters (a few words make a good one).", "password");
    case "same_password":
      return by("Choose a password different from your current one.", "password");
    case "signup_disabled":
      return by(`New accounts are not open here. Ask for an invitation.${ask}`, "email");
    case "otp_disabled":
      return by("There is no account with this e-mail address. Create one first.", "email");
    case "otp_expired":
      return by(
        context === "code"
          ? "That code has expired or was already used. Ask for a new one."
          : "This link has expired or was already used. Ask for a new one.",
        context === "code" ? "code" : undefined,
      );
    case "mfa_verification_failed":
      return by("That code is not right. Enter the code your authenticator app shows now.", "code");
    case "mfa_challenge_expired":
      return by("That took too long. Enter the code again.", "code");
    case "over_request_rate_limit":
    case "over_email_send_rate_limit":
      return by("Too many tries in a short time. Wait a few minutes, then try again.");
    case "session_not_found":
    case "refresh_token_not_found":
    case "bad_jwt":
      return by("Your session has ended. Sign in again.");
    case "validation_failed":
      // GoTrue's (and /auth/v1's) words for a malformed address.
      if (typeof e.message === "string" && e.message.startsWith("Unable to validate email address"))
        return by("Enter an e-mail address such as name@example.com.", "email");
      if (context === "code") return by("Enter the six-digit code from the e-mail.", "code");
      return by(
        "Fill in both fields: an e-mail address and a password.",
        context === "sign-in" || context === "sign-up" ? "email" : undefined,
      );
    case "passkey_disabled":
      return by("Passkeys are not turned on here. Sign in with your password or a code instead.");
    case "webauthn_verification_failed":
    case "webauthn_challenge_not_found":
    case "webauthn_challenge_expired":
      return by(
        context === "passkey"
          ? "That passkey was not accepted here. Try again, or sign in with your password or a code."
          : "The passkey could not be added. Try again.",
      );
    case "webauthn_credential_exists":
    case "ERROR_AUTHENTICATOR_PREVIOUSLY_REGISTERED":
      return by("This device already holds a passkey for you here.");
    case "too_many_passkeys":
      return by("You have as many passkeys as you can have. Remove one first.");
    case "ERROR_CEREMONY_ABORTED":
      return by("The passkey prompt was closed or timed out. Try again.");
    case "insufficient_aal":
      return by("Sign in with your authenticator app's code first, then try again.");
    case "42501":
      return by("Your role in this account does not allow this. Ask an owner or admin of the account.");
    case "PGRST116":
      return by("This was not found: it does not exist, or it belongs to an account you are not in.");
    case "23502":
    case "23514":
      return by("Something required is missing or not allowed. Check the fields and try again.");
  }
  if (status === 401 || status === 403) return by("Your session has ended. Sign in again.");
  if (status !== undefined && status >= 500)
    return by(`The server had a problem. Try again in a moment.${ask}`);
  return by(`That did not work. Try again.${ask}`);
}

// ---------------------------------------------------------------------------------------------
// Getting in

export async function signInWithPassword(email: string, password: string): Promise<void> {
  if (!email.trim()) throw new PlainError("Enter your e-mail address.", { field: "email" });
  if (!password) throw new PlainError("Enter your password.", { field: "password" });
  const { error } = await sb().auth.signInWithPassword({ email: email.trim(), password });
  if (error) throw plain(error, "sign-in");
}

/** Mails a sign-in code (and link) to an address that has an account. */
export async function sendSignInCode(email: string): Promise<void> {
  if (!email.trim()) throw new PlainError("Enter your e-mail address.", { field: "email" });
  const { error } = await sb().auth.signInWithOtp({
    email: email.trim(),
    options: { shouldCreateUser: false, emailRedirectTo: callbackUrl() },
  });
  if (error) throw plain(error, "sign-in");
}

export async function verifySignInCode(email: string, code: string): Promise<void> {
  const token = code.replace(/\s+/g, "");
  if (!/^\d{6}$/.test(token))
    throw new PlainError("Enter the six-digit code from the e-mail.", { field: "code" });
  const { error } = await sb().auth.verifyOtp({ email: email.trim(), token, type: "email" });
  if (error) throw plain(error, "code");
}

/** Creates an account; "confirm" when the tenant mails a confirmation link first. */
export async function signUp(email: string, password: string): Promise<"signed_in" | "confirm"> {
  if (!email.trim()) throw new PlainError("Enter your e-mail address.", { field: "email" });
  if (password.length < 8)
    throw new PlainError("Choose a password of at least 8 characters.", { field: "password" });
  const { data, error } = await sb().auth.signUp({
    email: email.trim(),
    password,
    options: { emailRedirectTo: callbackUrl() },
  });
  if (error) throw plain(error, "sign-up");
  return data.session ? "signed_in" : "confirm";
}

export async function sendPasswordReset(email: string): Promise<void> {
  if (!email.trim()) throw new PlainError("Enter your e-mail address.", { field: "email" });
  const { error } = await sb().auth.resetPasswordForEmail(email.trim(), { redirectTo: callbackUrl() });
  if (error) throw plain(error, "sign-in");
}

/**
 * The session a mailed link brings in the fragment (`#access_token=…&type=invite`), or what went
 * wrong. The fragment is removed from the address bar either way.
 */
export async function sessionFromLink(hash: string): Promise<{ type: string }> {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  history.replaceState(null, "", location.pathname + location.search);
  if (params.get("error") || params.get("error_code"))
    throw plain({ code: params.get("error_code") }, "password");
  const access_token = params.get("access_token");
  const refresh_token = params.get("refresh_token");
  if (!access_token || !refresh_token)
    throw new PlainError("This link is incomplete. Open it again from the e-mail, or ask for a new one.");
  const { error } = await sb().auth.setSession({ access_token, refresh_token });
  if (error) throw plain(error, "password");
  return { type: params.get("type") ?? "signup" };
}

export async function choosePassword(password: string): Promise<void> {
  if (password.length < 8)
    throw new PlainError("Choose a password of at least 8 characters.", { field: "password" });
  const { error } = await sb().auth.updateUser({ password });
  if (error) throw plain(error, "password");
}

// ---------------------------------------------------------------------------------------------
// Sign-in with the tenant's OpenID Connect providers (docs/portal.md, "Sign-in providers")

export interface SignInProvider {
  name: string;
  label: string;
}

/** The providers the tenant turned on (GET /auth/v1/settings: `external`, `external_labels`). */
export async function signInProviders(): Promise<SignInProvider[]> {
  const t = currentTenant();
  const response = await fetch("/auth/v1/settings", { headers: { apikey: t.anon_key } }).catch(() => null);
  if (!response?.ok) return [];
  const settings = (await response.json()) as {
    external?: Record<string, boolean>;
    external_labels?: Record<string, string>;
  };
  return Object.entries(settings.external_labels ?? {})
    .filter(([name]) => settings.external?.[name] === true)
    .map(([name, label]) => ({ name, label }));
}

/**
 * Sends the browser to the provider (supabase-js signInWithOAuth); it comes back to
 * /auth/callback with the session in the fragment, as from a mailed link.
 */
export async function signInWithProvider(name: string): Promise<void> {
  const { error } = await sb().auth.signInWithOAuth({
    provider: name as "google",
    // The tenant's apikey names the tenant whose provider this is (docs/auth.md).
    options: { redirectTo: callbackUrl(), queryParams: { apikey: currentTenant().anon_key } },
  });
  if (error) throw plain(error, "sign-in");
}

// ---------------------------------------------------------------------------------------------
// Passkeys (docs/portal.md, "Passkeys"): supabase-js's passkey API, the browser's WebAuthn prompt

export interface Passkey {
  id: string;
  friendly_name?: string;
  created_at: string;
  last_used_at?: string;
}

/** Whether this browser can use passkeys at all (WebAuthn in a secure context). */
export function browserHasPasskeys(): boolean {
  return typeof window !== "undefined" && window.isSecureContext && "PublicKeyCredential" in window;
}

/** Signs in with a passkey this device (or a phone nearby) holds for this portal. */
export async function signInWithPasskey(): Promise<void> {
  const { error } = await sb().auth.signInWithPasskey();
  if (error) throw plain(error, "passkey");
}

/** Adds a passkey for the signed-in person, named as they chose (or not at all). */
export async function addPasskey(name: string): Promise<void> {
  const { data, error } = await sb().auth.registerPasskey();
  if (error) throw plain(error, "passkey-add");
  const friendlyName = name.trim();
  if (data && friendlyName) {
    const renamed = await sb().auth.passkey.update({ passkeyId: data.id, friendlyName });
    if (renamed.error) throw plain(renamed.error, "data");
  }
}

export async function listPasskeys(): Promise<Passkey[]> {
  const { data, error } = await sb().auth.passkey.list();
  if (error) throw plain(error, "data");
  return data ?? [];
}

export async function removePasskey(passkeyId: string): Promise<void> {
  const { error } = await sb().auth.passkey.delete({ passkeyId });
  if (error) throw plain(error, "data");
}

export async function signOut(): Promise<void> {
  const { error } = await sb().auth.signOut({ scope: "local" });
  if (!error) return;
  // Signed out on this browser whatever the server says: auth-js keeps the session when the
  // server does not answer (busy, unreachable), so it is removed here as auth-js itself does.
  await (sb().auth as unknown as { _removeSession(): Promise<void> })._removeSession();
}

// ---------------------------------------------------------------------------------------------
// A second factor (TOTP) where an account requires aal2

export async function assurance(): Promise<{ current: string | null; next: string | null }> {
  const { data, error } = await sb().auth.mfa.getAuthenticatorAssuranceLevel();
  if (error) throw plain(error, "code");
  return { current: data.currentLevel, next: data.nextLevel };
}

/** Verifies a code of the member's authenticator app: the session becomes aal2. */
export async function verifySecondFactor(code: string): Promise<void> {
  const token = code.replace(/\s+/g, "");
  if (!/^\d{6}$/.test(token))
    throw new PlainError("Enter the six-digit code your authenticator app shows.", { field: "code" });
  const { data, error } = await sb().auth.mfa.listFactors();
  if (error) throw plain(error, "code");
  const factor = data.totp.find((f) => f.status === "verified");
  if (!factor)
    throw new PlainError(
      "You have no authenticator app set up. Ask the account's owner, or your platform's support, for help.",
      { field: "code" },
    );
  const verified = await sb().auth.mfa.challengeAndVerify({ factorId: factor.id, code: token });
  if (verified.error) throw plain(verified.error, "code");
}

/** Whether the person has an authenticator app set up (a verified TOTP factor). */
export async function hasSecondFactor(): Promise<boolean> {
  const { data, error } = await sb().auth.mfa.listFactors();
  if (error) throw plain(error, "code");
  return data.totp.some((f) => f.status === "verified");
}

/**
 * Sets up an authenticator app (where a payout asks a second factor and the person has none): a
 * new TOTP factor, its QR code (a data: URL) and its key to type in instead; an unfinished earlier
 * attempt is dropped first. `confirmSecondFactor` then verifies its first code (the session
 * becomes aal2).
 */
export async function startSecondFactor(): Promise<{ factorId: string; qr: string; secret: string }> {
  const listed = await sb().auth.mfa.listFactors();
  if (listed.error) throw plain(listed.error, "code");
  for (const f of listed.data.all)
    if (f.factor_type === "totp" && f.status === "unverified")
      await sb().auth.mfa.unenroll({ factorId: f.id });
  const { data, error } = await sb().auth.mfa.enroll({
    factorType: "totp",
    friendlyName: "Authenticator app",
  });
  if (error) throw plain(error, "code");
  // auth-js prefixes the server's SVG unescaped; escaped, a "#" in it cannot end the address.
  const svg = data.totp.qr_code.replace(/^data:image\/svg\+xml;utf-8,/, "");
  const qr = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  return { factorId: data.id, qr, secret: data.totp.secret };
}

export async function confirmSecondFactor(factorId: string, code: string): Promise<void> {
  const token = code.replace(/\s+/g, "");
  if (!/^\d{6}$/.test(token))
    throw new PlainError("Enter the six-digit code your authenticator app shows.", { field: "code" });
  const verified = await sb().auth.mfa.challengeAndVerify({ factorId, code: token });
  if (verified.error) throw plain(verified.error, "code");
}

// ---------------------------------------------------------------------------------------------
// Accounts

export type Role = "owner" | "admin" | "member" | "viewer";

export interface Account {
  id: string;
  name: string;
  kind: "label" | "artist";
  role: Role;
  require_aal2: boolean;
  reachable: boolean;
}

export const canEdit = (role: Role | undefined): boolean =>
  role === "owner" || role === "admin" || role === "member";

/** The words for a failure known only by its status (and code): busy, signed out, broken. */
export function plainFromStatus(status: number, code = ""): PlainError {
  return plain({ status, code }, "data");
}

/** The member's access token now (supabase-js refreshes it), or "your session has ended". */
export async function accessToken(): Promise<string> {
  const { data } = await sb().auth.getSession();
  if (!data.session) throw new PlainError("Your session has ended. Sign in again.", { code: "signed_out" });
  return data.session.access_token;
}

export async function myAccounts(): Promise<{ aal: string; accounts: Account[] }> {
  let response: Response;
  try {
    response = await fetch("/portal/accounts.json", {
      headers: { apikey: currentTenant().anon_key, authorization: `Bearer ${await accessToken()}` },
    });
  } catch (error) {
    throw plain(error, "data");
  }
  if (!response.ok) throw plain({ status: response.status }, "data");
  return (await response.json()) as { aal: string; accounts: Account[] };
}

const ACCOUNT_KEY = () => `backline-portal-account-${currentTenant().id}`;

export function rememberedAccount(): string | null {
  try {
    return localStorage.getItem(ACCOUNT_KEY());
  } catch {
    return null;
  }
}

export function rememberAccount(id: string): void {
  try {
    localStorage.setItem(ACCOUNT_KEY(), id);
  } catch {
    // No storage: the first account is shown next time.
  }
}

// ---------------------------------------------------------------------------------------------
// The catalogue, through /rest/v1 (row security decides)

export interface ReleaseRow {
  id: string;
  account_id: string;
  title: string;
  version: string | null;
  release_type: string;
  artist_name: string | null;
  release_date: string | null;
  status: string;
  status_reason: string | null;
  created_at: string;
  artist_profiles: { name: string } | null;
}

export interface TrackRow {
  id: string;
  title: string;
  version: string | null;
  isrc: string | null;
  duration: number | null;
  track_number: number | null;
  disc_number: number | null;
}

export interface ReleaseDetail extends ReleaseRow {
  upc: string | null;
  label_name: string | null;
  primary_genre: string | null;
  submitted_at: string | null;
  updated_at: string;
  tracks: TrackRow[];
}

export const PAGE_SIZE = 25;

const RELEASE_COLUMNS =
  "id, account_id, title, version, release_type, artist_name, release_date, status, status_reason, created_at, artist_profiles(name)";

/** One page of an account's releases, newest first: rows `from` to `from + PAGE_SIZE - 1`. */
export async function listReleases(
  accountId: string,
  from: number,
): Promise<{ rows: ReleaseRow[]; hasMore: boolean }> {
  // One row more than shown says whether there is a next page, without counting the list.
  const { data, error } = await sb()
    .from("releases")
    .select(RELEASE_COLUMNS)
    .eq("account_id", accountId)
    .order("created_at", { ascending: false })
    .order("id", { ascending: false })
    .range(from, from + PAGE_SIZE);
  if (error) throw plain(error, "data");
  const rows = (data ?? []) as unknown as ReleaseRow[];
  return { rows: rows.slice(0, PAGE_SIZE), hasMore: rows.length > PAGE_SIZE };
}

export async function getRelease(id: string): Promise<ReleaseDetail | null> {
  if (!/^[0-9a-f-]{36}$/i.test(id)) return null;
  const { data, error } = await sb()
    .from("releases")
    .select(
      `${RELEASE_COLUMNS}, upc, label_name, primary_genre, submitted_at, updated_at, tracks(id, title, version, isrc, duration, track_number, disc_number)`,
    )
    .eq("id", id)
    .order("disc_number", { referencedTable: "tracks" })
    .order("track_number", { referencedTable: "tracks" })
    .maybeSingle();
  if (error) throw plain(error, "data");
  return (data as unknown as ReleaseDetail | null) ?? null;
}

/**
 * A draft release of an account: its artist found by name among the account's artists, or
 * created. Returns the new release's id.
 */
export async function createDraftRelease(accountId: string, title: string, artist: string): Promise<string> {
  const t = title.trim();
  const a = artist.trim();
  if (!t) throw new PlainError("Give the release a title.", { field: "title" });
  if (!a) throw new PlainError("Name the artist.", { field: "artist" });
  if (t.length > 500) throw new PlainError("Keep the title under 500 characters.", { field: "title" });
  const found = await sb()
    .from("artist_profiles")
    .select("id")
    .eq("account_id", accountId)
    .eq("name", a)
    .limit(1);
  if (found.error) throw plain(found.error, "data");
  let artistId = (found.data?.[0] as { id: string } | undefined)?.id;
  if (!artistId) {
    const made = await sb()
      .from("artist_profiles")
      .insert({ account_id: accountId, name: a })
      .select("id")
      .single();
    if (made.error) throw plain(made.error, "data");
    artistId = (made.data as { id: string }).id;
  }
  const release = await sb()
    .from("releases")
    .insert({ account_id: accountId, artist_id: artistId, title: t, status: "draft" })
    .select("id")
    .single();
  if (release.error) throw plain(release.error, "data");
  return (release.data as { id: string }).id;
}

// ---------------------------------------------------------------------------------------------
// Notifications (seed 000's table): the member's own, whatever the account; row security
// decides (a member reads and marks only their own).

export interface NotificationRow {
  id: string;
  account_id: string | null;
  kind: string;
  title: string;
  body: string | null;
  data: { release_id?: string; store?: string } & Record<string, unknown>;
  read: boolean;
  created_at: string;
}

/** How many notifications the member has not read. */
export async function unreadNotifications(): Promise<number> {
  const { count, error } = await sb()
    .from("notifications")
    .select("id", { count: "exact", head: true })
    .eq("read", false);
  if (error) throw plain(error, "data");
  return count ?? 0;
}

/** The member's newest notifications, `limit` at most. */
export async function listNotifications(limit = 50): Promise<NotificationRow[]> {
  const { data, error } = await sb()
    .from("notifications")
    .select("id, account_id, kind, title, body, data, read, created_at")
    .order("created_at", { ascending: false })
    .order("id", { ascending: false })
    .limit(limit);
  if (error) throw plain(error, "data");
  return (data ?? []) as NotificationRow[];
}

/** Marks the notifications `ids` read, or every unread one when `ids` is "all". */
export async function markNotificationsRead(ids: string[] | "all"): Promise<void> {
  let query = sb().from("notifications").update({ read: true }).eq("read", false);
  if (ids !== "all") query = query.in("id", ids);
  const { error } = await query;
  if (error) throw plain(error, "data");
}

/** The titles of the releases `ids` the member can see, by id (for the royalties by release). */
export async function releaseTitles(ids: string[]): Promise<Map<string, string>> {
  const { data, error } = await sb().from("releases").select("id, title").in("id", ids.slice(0, 200));
  if (error) throw plain(error, "data");
  return new Map(((data ?? []) as { id: string; title: string }[]).map((r) => [r.id, r.title]));
}
