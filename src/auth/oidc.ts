import { createHash, randomBytes, randomUUID } from "node:crypto";
import { createRemoteJWKSet, customFetch, type JWTPayload, jwtVerify } from "jose";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { guardedFetch, type OutboundFetch } from "../http/outbound.ts";
import { displayNameOf, provisionAccounts } from "../tenancy/memberships.ts";
import { AuthError, validationFailed } from "./errors.ts";
import { type SessionContext, startSession } from "./sessions.ts";
import type { AuthSettings } from "./settings.ts";
import { sha256 } from "./tokens.ts";
import { providerNotEnabled } from "./unsupported-routes.ts";
import { findUserByEmail, findUserById, isStaffUser, type UserRow, updateUser } from "./users.ts";

/**
 * Sign-in with a tenant's OpenID Connect providers (docs/auth.md, "OpenID Connect providers";
 * migration 0052), as GoTrue's external providers: supabase-js's signInWithOAuth sends the browser
 * to GET /authorize, which starts a flow (a stored, single-use, expiring state and a nonce) and
 * sends it on to the provider; the provider sends it back to GET /callback, which exchanges the
 * provider's code, verifies its ID token (signature from the provider's JWKS, iss, aud, exp,
 * nonce), finds or makes the user by identity (provider + sub) and sends the browser to the
 * client's redirect_to with a code (PKCE) or the session in the fragment (implicit). A new
 * identity joins an existing user only by an address the provider says is verified.
 */

/** What a preset fills in: signInWithOAuth({ provider: "google" | "apple" }). */
export const PRESETS: Record<string, { issuer: string; display_name: string; scopes: string }> = {
  google: { issuer: "https://accounts.google.com", display_name: "Google", scopes: "openid email profile" },
  // Apple sends the user's name and address only with response_mode=form_post (POST /callback).
  apple: { issuer: "https://appleid.apple.com", display_name: "Apple", scopes: "openid email name" },
};

/** Seconds the browser has at the provider, and the client to exchange its code (GoTrue: 5 min). */
const STATE_TTL_S = 600;
const CODE_TTL_S = 300;
const HTTP_TIMEOUT_MS = 10_000;

export interface ProviderRow {
  id: string;
  tenant_id: string;
  name: string;
  display_name: string;
  issuer: string;
  client_id: string;
  client_secret_sealed: string | null;
  scopes: string;
  enabled: boolean;
}

interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  userinfo_endpoint?: string;
  token_endpoint_auth_methods_supported?: string[];
  response_modes_supported?: string[];
}

interface FlowRow {
  id: string;
  tenant_id: string;
  provider: string;
  nonce: string;
  provider_code_verifier: string;
  redirect_to: string;
  code_challenge: string | null;
  code_challenge_method: "s256" | "plain" | null;
  link_user_id: string | null;
  user_id: string | null;
  expires_at: Date;
}

/** Whether an issuer may be reached over plain HTTP: a provider on this machine only (tests, development). */
export function loopback(url: URL): boolean {
  return ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
}

/** An issuer as stored: an https URL (http only on loopback), without a trailing slash. */
export function checkIssuer(issuer: string): string {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new Error("issuer must be a URL");
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && loopback(url)))
    throw new Error("issuer must be an https URL");
  if (url.search || url.hash) throw new Error("issuer must have no query or fragment");
  return issuer.replace(/\/+$/, "");
}

// Discovery documents and key sets, per issuer, for an hour (jose refetches a key set on an unknown kid).
// Tenant admins choose the issuers, so both maps are bounded: past CACHE_LIMIT entries the least
// recently used goes (a Map iterates in insertion order; a hit is moved to the end).
const CACHE_LIMIT = 256;
const discoveries = new Map<string, { doc: Discovery; until: number }>();
const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > CACHE_LIMIT) map.delete(map.keys().next().value as string);
}

async function discover(fetch: OutboundFetch, issuer: string): Promise<Discovery> {
  const cached = discoveries.get(issuer);
  if (cached && cached.until > Date.now()) {
    remember(discoveries, issuer, cached);
    return cached.doc;
  }
  const res = await fetch(`${issuer}/.well-known/openid-configuration`, {
    signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    headers: { accept: "application/json" },
  }).catch((error: unknown) => {
    throw providerUnreachable(`discovery failed: ${(error as Error).message}`);
  });
  if (!res.ok) throw providerUnreachable(`discovery answered ${res.status}`);
  const doc = (await res.json()) as Discovery;
  // OpenID Connect Discovery 1.0, section 4.3: the document names the issuer it was asked for.
  if (doc.issuer?.replace(/\/+$/, "") !== issuer)
    throw providerUnreachable(`discovery names issuer ${doc.issuer}, not ${issuer}`);
  for (const key of ["authorization_endpoint", "token_endpoint", "jwks_uri"] as const) {
    if (typeof doc[key] !== "string") throw providerUnreachable(`discovery has no ${key}`);
  }
  remember(discoveries, issuer, { doc, until: Date.now() + 3600_000 });
  return doc;
}

/** A provider the tenant set up and turned off (or removed during a sign-in): GoTrue's answer. */
const providerDisabled = () =>
  new AuthError(400, "validation_failed", "Unsupported provider: provider is not enabled");

const providerUnreachable = (why: string) =>
  new AuthError(502, "unexpected_failure", `The identity provider could not be used: ${why}`);

function keySet(fetch: OutboundFetch, jwksUri: string) {
  let set = keySets.get(jwksUri);
  if (set) remember(keySets, jwksUri, set);
  else {
    set = createRemoteJWKSet(new URL(jwksUri), {
      timeoutDuration: HTTP_TIMEOUT_MS,
      [customFetch]: (url, options) => fetch(url, options),
    });
    remember(keySets, jwksUri, set);
  }
  return set;
}

const b64url = (buf: Buffer) => buf.toString("base64url");
const s256 = (verifier: string) => b64url(createHash("sha256").update(verifier).digest());

export async function findProvider(tx: Tx, tenantId: string, name: string): Promise<ProviderRow | undefined> {
  return (
    await tx.query<ProviderRow>(
      `select id, tenant_id, name, display_name, issuer, client_id, client_secret_sealed, scopes, enabled
       from internal.oidc_providers where tenant_id = $1 and name = $2`,
      [tenantId, name],
    )
  ).rows[0];
}

/** The tenant's enabled providers, for /settings' `external` map and the portal's buttons. */
export async function enabledProviders(
  db: Db,
  tenantId: string,
): Promise<{ name: string; display_name: string }[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<{ name: string; display_name: string }>(
          "select name, display_name from internal.oidc_providers where tenant_id = $1 and enabled order by name",
          [tenantId],
        )
      ).rows,
    { readOnly: true },
  );
}

export interface AuthorizeInput {
  provider: string;
  /** Where the browser goes at the end: already checked against the tenant's allow list. */
  redirectTo: string;
  codeChallenge: string | undefined;
  codeChallengeMethod: string | undefined;
  /** Scopes asked for besides the provider's own (signInWithOAuth's `scopes`). */
  scopes: string | undefined;
  /** Other query parameters passed on to the provider (prompt, login_hint, …). */
  extra: Record<string, string>;
  /** linkIdentity: the signed-in user. */
  linkUserId?: string;
}

/** Parameters the server itself sets on the provider's URL: a client's copy is ignored. */
const OWN_PARAMS = new Set([
  "provider",
  "redirect_to",
  "code_challenge",
  "code_challenge_method",
  "scopes",
  "skip_http_redirect",
  "apikey",
  "client_id",
  "redirect_uri",
  "response_type",
  "response_mode",
  "scope",
  "state",
  "nonce",
  "request",
  "request_uri",
]);

export function passThrough(query: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    if (!OWN_PARAMS.has(k) && typeof v === "string" && /^[a-z_]{1,40}$/.test(k)) out[k] = v;
  }
  return out;
}

export class OidcFlows {
  private readonly db: Db;
  /** PUBLIC_URL. */
  readonly publicUrl: string;

  /** Calls to the providers: https to public addresses only, unless OIDC_ALLOW_PRIVATE (src/http/outbound.ts). */
  private readonly fetch: OutboundFetch;

  constructor(deps: { db: Db; publicUrl: string; allowPrivate?: boolean }) {
    this.db = deps.db;
    this.publicUrl = deps.publicUrl;
    this.fetch = guardedFetch({ allowPrivate: deps.allowPrivate ?? false });
  }

  /** The provider's redirect_uri: one for every tenant (the state names the flow). */
  get callbackUrl(): string {
    return `${this.publicUrl}/auth/v1/callback`;
  }

  /**
   * GET /authorize and GET /user/identities/authorize: the provider's authorization URL for a new
   * flow (state, nonce and PKCE towards the provider stored, the state hashed).
   */
  async authorize(tenantId: string, input: AuthorizeInput): Promise<string> {
    const provider = await this.db.asService((tx) => findProvider(tx, tenantId, input.provider), {
      readOnly: true,
    });
    if (!provider?.enabled) throw provider ? providerDisabled() : providerNotEnabled(input.provider);
    let method: "s256" | "plain" | null = null;
    if (input.codeChallenge) {
      const m = (input.codeChallengeMethod ?? "").toLowerCase();
      if (m !== "s256" && m !== "plain") throw validationFailed("code challenge method not supported");
      if (!/^[A-Za-z0-9._~-]{43,128}$/.test(input.codeChallenge))
        throw validationFailed("code challenge must be 43 to 128 characters of the PKCE alphabet");
      method = m;
    }
    const doc = await discover(this.fetch, provider.issuer);
    const state = b64url(randomBytes(32));
    const nonce = b64url(randomBytes(24));
    const verifier = b64url(randomBytes(48));
    await this.db.asService(async (tx) => {
      // Flows left unfinished are dropped as new ones start.
      await tx.query("delete from internal.oauth_flow_states where expires_at < now() - interval '1 hour'");
      await tx.query(
        `insert into internal.oauth_flow_states (tenant_id, provider, state_hash, nonce, provider_code_verifier,
           redirect_to, code_challenge, code_challenge_method, link_user_id, expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + make_interval(secs => $10))`,
        [
          tenantId,
          provider.name,
          sha256(state),
          nonce,
          verifier,
          input.redirectTo,
          method ? input.codeChallenge : null,
          method,
          input.linkUserId ?? null,
          STATE_TTL_S,
        ],
      );
    });
    const scopes = new Set(provider.scopes.split(/\s+/).filter(Boolean));
    scopes.add("openid");
    for (const s of (input.scopes ?? "").split(/[\s,]+/).filter(Boolean)) scopes.add(s);
    const url = new URL(doc.authorization_endpoint);
    for (const [k, v] of Object.entries(input.extra)) url.searchParams.set(k, v);
    url.searchParams.set("client_id", provider.client_id);
    url.searchParams.set("redirect_uri", this.callbackUrl);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("scope", [...scopes].join(" "));
    url.searchParams.set("state", state);
    url.searchParams.set("nonce", nonce);
    url.searchParams.set("code_challenge", s256(verifier));
    url.searchParams.set("code_challenge_method", "S256");
    // Apple sends the name and address it was asked for only in a form posted to the callback.
    if (scopes.has("name") || scopes.has("email")) {
      if (doc.response_modes_supported?.includes("form_post") && provider.issuer === PRESETS.apple?.issuer)
        url.searchParams.set("response_mode", "form_post");
    }
    return url.toString();
  }

  /**
   * The provider sent the browser back: the state is spent (once, unexpired), the code exchanged
   * and the ID token verified, the user found or made. Returns where the browser goes next; a
   * state that names no flow is an error with nowhere to send the browser.
   */
  async callback(
    params: Record<string, string | undefined>,
    context: (tenantId: string) => Promise<SessionContext>,
  ): Promise<string> {
    const state = params.state;
    const flow = state
      ? await this.db.asService(
          async (tx) =>
            (
              await tx.query<FlowRow>(
                `update internal.oauth_flow_states set state_hash = null
                 where state_hash = $1 and expires_at > now()
                 returning id, tenant_id, provider, nonce, provider_code_verifier, redirect_to, code_challenge,
                   code_challenge_method, link_user_id, user_id, expires_at`,
                [sha256(state)],
              )
            ).rows[0],
        )
      : undefined;
    if (!flow) throw new AuthError(400, "bad_oauth_state", "OAuth callback with invalid state");
    const pkce = flow.code_challenge !== null;
    try {
      if (params.error || params.error_description)
        throw new AuthError(
          400,
          "bad_oauth_callback",
          params.error_description || `The provider answered ${params.error ?? "an error"}`,
        );
      if (!params.code) throw new AuthError(400, "bad_oauth_callback", "OAuth callback has no code");
      const ctx = await context(flow.tenant_id);
      const provider = await this.db.asService((tx) => findProvider(tx, flow.tenant_id, flow.provider), {
        readOnly: true,
      });
      if (!provider?.enabled) throw providerDisabled();
      const claims = await this.exchange(provider, flow, params.code);
      const outcome = await this.db.asService(async (tx) => {
        const user = await this.userOf(tx, provider, flow, claims, ctx.settings);
        if (pkce) {
          const code = randomUUID();
          await tx.query(
            `update internal.oauth_flow_states set auth_code_hash = $2, user_id = $3,
               expires_at = now() + make_interval(secs => $4) where id = $1`,
            [flow.id, sha256(code), user.id, CODE_TTL_S],
          );
          return { code };
        }
        await tx.query("delete from internal.oauth_flow_states where id = $1", [flow.id]);
        return { session: await startSession(tx, ctx, user, "oauth") };
      });
      const url = new URL(flow.redirect_to);
      if (outcome.code) {
        url.searchParams.set("code", outcome.code);
      } else {
        const s = outcome.session as Record<string, unknown>;
        url.hash = new URLSearchParams({
          access_token: String(s.access_token),
          expires_at: String(s.expires_at),
          expires_in: String(s.expires_in),
          refresh_token: String(s.refresh_token),
          token_type: "bearer",
        }).toString();
      }
      return url.toString();
    } catch (error) {
      if (!(error instanceof AuthError)) throw error;
      await this.db.asService((tx) =>
        tx.query("delete from internal.oauth_flow_states where id = $1", [flow.id]),
      );
      // GoTrue sends the browser back with the error: in the query (PKCE) or the fragment (implicit).
      const url = new URL(flow.redirect_to);
      const q = new URLSearchParams({
        error: error.status >= 500 ? "server_error" : "access_denied",
        error_code: error.code,
        error_description: error.message,
      });
      if (pkce) for (const [k, v] of q) url.searchParams.set(k, v);
      else url.hash = q.toString();
      return url.toString();
    }
  }

  /** The provider's code for tokens; the ID token verified; the claims (with userinfo's, when the token has no address). */
  private async exchange(provider: ProviderRow, flow: FlowRow, code: string): Promise<JWTPayload> {
    const doc = await discover(this.fetch, provider.issuer);
    const secret = provider.client_secret_sealed
      ? this.db.secrets.decrypt(provider.client_secret_sealed)
      : undefined;
    const form = new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: this.callbackUrl,
      code_verifier: flow.provider_code_verifier,
    });
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
    };
    const methods = doc.token_endpoint_auth_methods_supported ?? ["client_secret_basic"];
    if (secret !== undefined && methods.includes("client_secret_basic")) {
      const enc = (s: string) => encodeURIComponent(s);
      headers.authorization = `Basic ${Buffer.from(`${enc(provider.client_id)}:${enc(secret)}`).toString("base64")}`;
    } else {
      form.set("client_id", provider.client_id);
      if (secret !== undefined) form.set("client_secret", secret);
    }
    const res = await this.fetch(doc.token_endpoint, {
      method: "POST",
      headers,
      body: form,
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    }).catch((error: unknown) => {
      throw providerUnreachable(`token endpoint: ${(error as Error).message}`);
    });
    const tokens = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok || typeof tokens.id_token !== "string")
      throw new AuthError(
        400,
        "bad_oauth_callback",
        `The provider refused the code: ${String(tokens.error_description ?? tokens.error ?? res.status)}`,
      );
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(tokens.id_token, keySet(this.fetch, doc.jwks_uri), {
        issuer: doc.issuer,
        audience: provider.client_id,
        clockTolerance: 30,
      }));
    } catch (error) {
      throw new AuthError(400, "bad_oauth_callback", `Invalid ID token: ${(error as Error).message}`);
    }
    if (claims.nonce !== flow.nonce)
      throw new AuthError(400, "bad_oauth_callback", "Invalid ID token: nonce does not match");
    // Several audiences: the token must have been issued to this client (OpenID Connect Core 3.1.3.7).
    if (Array.isArray(claims.aud) && claims.aud.length > 1 && claims.azp !== provider.client_id)
      throw new AuthError(400, "bad_oauth_callback", "Invalid ID token: azp is not this client");
    if (typeof claims.sub !== "string" || claims.sub === "")
      throw new AuthError(400, "bad_oauth_callback", "Invalid ID token: no sub");
    if (claims.email === undefined && doc.userinfo_endpoint && typeof tokens.access_token === "string") {
      const info = await this.fetch(doc.userinfo_endpoint, {
        headers: { authorization: `Bearer ${tokens.access_token}`, accept: "application/json" },
        signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
      })
        .then((r) => (r.ok ? (r.json() as Promise<Record<string, unknown>>) : undefined))
        .catch(() => undefined);
      // Userinfo's claims count only for the same subject (OpenID Connect Core 5.3.2).
      if (info && info.sub === claims.sub) claims = { ...info, ...claims };
    }
    return claims;
  }

  /** The user the identity belongs to, made or linked as GoTrue does (docs/auth.md). */
  private async userOf(
    tx: Tx,
    provider: ProviderRow,
    flow: FlowRow,
    claims: JWTPayload,
    settings: Pick<AuthSettings, "disable_signup" | "email_confirmation">,
  ): Promise<UserRow> {
    const sub = claims.sub as string;
    const email =
      typeof claims.email === "string" && claims.email !== "" ? claims.email.toLowerCase() : undefined;
    // Apple says "true" as a string.
    const verified =
      email !== undefined && (claims.email_verified === true || claims.email_verified === "true");
    const identityData: Record<string, unknown> = {
      ...pick(claims, [
        "iss",
        "sub",
        "name",
        "given_name",
        "family_name",
        "picture",
        "preferred_username",
        "locale",
      ]),
      ...(email ? { email, email_verified: verified } : {}),
      provider_id: sub,
      phone_verified: false,
      ...(typeof claims.name === "string" ? { full_name: claims.name } : {}),
      ...(typeof claims.picture === "string" ? { avatar_url: claims.picture } : {}),
    };
    const existing = (
      await tx.query<{ id: string; user_id: string; iss: string | null }>(
        `select id, user_id, identity_data ->> 'iss' as iss from internal.identities
         where tenant_id = $1 and provider = $2 and provider_id = $3 for update`,
        [flow.tenant_id, provider.name, sub],
      )
    ).rows[0];
    // An identity is its issuer's subject, not the provider's name's: after the provider's issuer
    // changed (a tenant admin may change it), the new issuer's `sub` is someone else's claim and
    // signs in to no identity the old issuer made (docs/auth.md).
    if (existing && existing.iss !== null && existing.iss !== claims.iss)
      throw new AuthError(
        422,
        "identity_already_exists",
        `This ${provider.name} identity was made by another issuer (${existing.iss}) than the provider's now: it cannot be used to sign in`,
      );
    if (flow.link_user_id) {
      if (existing && existing.user_id !== flow.link_user_id)
        throw new AuthError(422, "identity_already_exists", "Identity is already linked to another user");
      const user = await findUserById(tx, flow.tenant_id, flow.link_user_id, true);
      if (!user) throw new AuthError(404, "user_not_found", "User not found");
      await this.saveIdentity(tx, user, provider.name, sub, identityData, existing?.id);
      return addProvider(tx, user, provider.name);
    }
    if (existing) {
      const user = await findUserById(tx, flow.tenant_id, existing.user_id, true);
      if (!user) throw new AuthError(404, "user_not_found", "User not found");
      await this.saveIdentity(tx, user, provider.name, sub, identityData, existing.id);
      return user;
    }
    const sameAddress = email ? await findUserByEmail(tx, flow.tenant_id, email) : undefined;
    if (sameAddress) {
      // Only an address the provider has verified joins the user who has it, as GoTrue links; and
      // never a staff member's (they link a provider themselves, signed in: linkIdentity).
      if (!verified || (await isStaffUser(tx, sameAddress.id)))
        throw new AuthError(
          422,
          "email_exists",
          "A user with this email address has already been registered",
        );
      const user = (await findUserById(tx, flow.tenant_id, sameAddress.id, true)) ?? sameAddress;
      let linked = user;
      if (user.email_proven_at === null) {
        // The provider proves the address first: whatever someone who had not proven it set up
        // (a password, sessions) ends, as after the first link mailed to it (AuthService.verify).
        await tx.query("delete from internal.sessions where tenant_id = $1 and user_id = $2", [
          user.tenant_id,
          user.id,
        ]);
        linked = await updateUser(tx, user, {
          encrypted_password: null,
          signup_contested_at: null,
          email_proven_at: new Date(),
          email_confirmed_at: user.email_confirmed_at ?? new Date(),
        });
      }
      await this.saveIdentity(tx, linked, provider.name, sub, identityData, undefined);
      return addProvider(tx, linked, provider.name);
    }
    // A new user, as GoTrue makes one: not where the tenant takes no sign-ups, and not with an
    // address the provider has not verified where the tenant wants addresses confirmed.
    if (settings.disable_signup)
      throw new AuthError(422, "signup_disabled", "Signups not allowed for this instance");
    if (settings.email_confirmation && !verified)
      throw new AuthError(
        422,
        "provider_email_needs_verification",
        `Unverified email with ${provider.name}: verify the address with ${provider.name} first`,
      );
    // The claims are its metadata, as GoTrue's; a verified address is proven.
    const metadata = { ...identityData };
    const user = (
      await tx.query<UserRow>(
        `insert into internal.users (tenant_id, email, raw_app_meta_data, raw_user_meta_data, email_confirmed_at,
           email_proven_at)
         values ($1, $2, $3, $4, case when $5::boolean then now() end, case when $5::boolean then now() end)
         returning id`,
        [
          flow.tenant_id,
          email ?? null,
          JSON.stringify({ provider: provider.name, providers: [provider.name] }),
          JSON.stringify(metadata),
          verified,
        ],
      )
    ).rows[0];
    if (!user) throw new Error("insert into internal.users returned no row");
    const created = await findUserById(tx, flow.tenant_id, user.id);
    if (!created) throw new Error("new user vanished");
    await this.saveIdentity(tx, created, provider.name, sub, identityData, undefined);
    if (email) {
      await provisionAccounts(
        tx,
        { id: created.id, tenant_id: created.tenant_id, email },
        displayNameOf(metadata),
      );
    }
    return created;
  }

  private async saveIdentity(
    tx: Tx,
    user: UserRow,
    provider: string,
    sub: string,
    data: Record<string, unknown>,
    identityId: string | undefined,
  ): Promise<void> {
    if (identityId) {
      await tx.query("update internal.identities set identity_data = $2 where id = $1", [
        identityId,
        JSON.stringify(data),
      ]);
      return;
    }
    await tx.query(
      `insert into internal.identities (tenant_id, user_id, provider, provider_id, identity_data)
       values ($1, $2, $3, $4, $5)`,
      [user.tenant_id, user.id, provider, sub, JSON.stringify(data)],
    );
  }

  /**
   * POST /token?grant_type=pkce (exchangeCodeForSession): the code from the callback, spent once,
   * with the verifier whose challenge /authorize was given.
   */
  async exchangeCode(ctx: SessionContext, body: Record<string, unknown>) {
    const code = body.auth_code;
    const verifier = body.code_verifier;
    if (typeof code !== "string" || code === "" || typeof verifier !== "string" || verifier === "")
      throw validationFailed("invalid request: both auth code and code verifier should be non-empty");
    const outcome = await this.db.asService(async (tx) => {
      const flow = (
        await tx.query<FlowRow>(
          `delete from internal.oauth_flow_states where tenant_id = $1 and auth_code_hash = $2
           returning id, tenant_id, provider, nonce, provider_code_verifier, redirect_to, code_challenge,
             code_challenge_method, link_user_id, user_id, expires_at`,
          [ctx.tenant.id, sha256(code)],
        )
      ).rows[0];
      if (!flow?.user_id || !flow.code_challenge)
        return new AuthError(404, "flow_state_not_found", "invalid flow state, no valid flow state found");
      if (flow.expires_at.getTime() < Date.now())
        return new AuthError(422, "flow_state_expired", "Flow state has expired");
      const expected = flow.code_challenge_method === "s256" ? s256(verifier) : verifier;
      if (expected !== flow.code_challenge)
        return new AuthError(
          403,
          "bad_code_verifier",
          "code challenge does not match previously saved code verifier",
        );
      const user = await findUserById(tx, ctx.tenant.id, flow.user_id);
      if (!user) return new AuthError(404, "user_not_found", "User not found");
      return startSession(tx, ctx, user, "oauth");
    });
    // A spent code stays spent whatever the outcome (the transaction commits the delete).
    if (outcome instanceof AuthError) throw outcome;
    return outcome;
  }

  /**
   * DELETE /user/identities/{identity_id} (unlinkIdentity): never the user's last identity
   * (GoTrue's single_identity_not_deletable).
   */
  async unlink(tenantId: string, userId: string, identityId: string): Promise<void> {
    await this.db.asService(async (tx) => {
      const user = await findUserById(tx, tenantId, userId, true);
      if (!user) throw new AuthError(404, "user_not_found", "User not found");
      const identities = (
        await tx.query<{ id: string; provider: string }>(
          "select id, provider from internal.identities where tenant_id = $1 and user_id = $2",
          [tenantId, userId],
        )
      ).rows;
      const target = identities.find((i) => i.id === identityId);
      if (!target) throw new AuthError(404, "identity_not_found", "Identity doesn't exist");
      if (identities.length <= 1)
        throw new AuthError(
          422,
          "single_identity_not_deletable",
          "User must have at least 1 identity after unlinking",
        );
      await tx.query("delete from internal.identities where id = $1", [identityId]);
      const providers = [...new Set(identities.filter((i) => i.id !== identityId).map((i) => i.provider))];
      const meta = user.raw_app_meta_data;
      await updateUser(tx, user, {
        raw_app_meta_data: JSON.stringify({
          ...meta,
          provider: providers.includes(String(meta.provider)) ? meta.provider : providers[0],
          providers,
        }),
      });
    });
  }
}

function pick(claims: JWTPayload, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (claims[k] !== undefined) out[k] = claims[k];
  return out;
}

/** app_metadata.providers gains the provider (GoTrue keeps the list of the user's identities' providers). */
async function addProvider(tx: Tx, user: UserRow, provider: string): Promise<UserRow> {
  const meta = user.raw_app_meta_data;
  const providers = Array.isArray(meta.providers) ? (meta.providers as string[]) : [];
  if (providers.includes(provider)) return user;
  return updateUser(tx, user, {
    raw_app_meta_data: JSON.stringify({
      ...meta,
      provider: meta.provider ?? provider,
      providers: [...providers, provider],
    }),
  });
}
