import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { asDbError, mapDbError } from "../db/errors.ts";
import { apikeyOf, bearerOf, type Caller, identify } from "../http/gateway.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { adminRoutes, requireAdmin } from "./admin-routes.ts";
import { validateEmail } from "./email-address.ts";
import type { VerifyType } from "./email-tokens.ts";
import { AuthError, authErrorBody, validationFailed } from "./errors.ts";
import { oidcRoutes, sessionContext } from "./oidc-routes.ts";
import { passkeyRoutes } from "./passkey-routes.ts";
import type { AuthService, RequestInfo, TokenUser } from "./service.ts";
import { authSettings, redirectAllowed } from "./settings.ts";
import { jwks } from "./signing-keys.ts";
import { idTokenProviderDisabled, unsupportedRoutes } from "./unsupported-routes.ts";

/**
 * /auth/v1, as @supabase/auth-js calls it (docs/auth.md). Every route needs the tenant's apikey;
 * /user and /logout also need a user's access token.
 */

const VERSION_HEADER = "x-supabase-api-version";
const SCOPES = ["global", "local", "others"] as const;
const VERIFY_TYPES: Record<string, VerifyType> = {
  signup: "signup",
  email: "email",
  magiclink: "magiclink",
  recovery: "recovery",
  email_change: "email_change",
  invite: "invite",
};

declare module "fastify" {
  interface FastifyRequest {
    caller?: Caller;
  }
}

export function body(request: FastifyRequest): Record<string, unknown> {
  const b = request.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== "object" || Array.isArray(b))
    throw validationFailed("The request body must be a JSON object");
  return b as Record<string, unknown>;
}

function query(request: FastifyRequest, name: string): string | undefined {
  const v = (request.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === "string" && v !== "" ? v : undefined;
}

export function info(request: FastifyRequest): RequestInfo {
  if (!request.caller) throw new Error("auth route without a caller");
  return { tenant: request.caller.tenant, ip: request.ip, userAgent: request.headers["user-agent"] };
}

/** The user an access token names, or GoTrue's error for a request without one. */
export function tokenUser(request: FastifyRequest): TokenUser {
  const user = request.caller?.user;
  if (!bearerOf(request)) {
    throw new AuthError(401, "no_authorization", "This endpoint requires a Bearer token");
  }
  if (!user) throw new AuthError(403, "bad_jwt", "invalid claim: missing sub claim");
  if (!user.sessionId) throw new AuthError(403, "bad_jwt", "invalid claim: missing session_id claim");
  return { userId: user.id, sessionId: user.sessionId };
}

export async function authRoutes(
  app: FastifyInstance,
  opts: { auth: AuthService; directory: TenantDirectory },
) {
  const { auth, directory } = opts;
  const publicUrl = auth.oidc.publicUrl;

  app.setErrorHandler((error, request, reply) => {
    const apiVersion = request.headers[VERSION_HEADER];
    const version = typeof apiVersion === "string" ? apiVersion : undefined;
    let authError: AuthError;
    const db = asDbError(error);
    const busy = db && mapDbError(db).status === 503 ? mapDbError(db) : undefined;
    if (error instanceof AuthError) {
      authError = error;
    } else if (db && busy) {
      // A busy database is the caller's to retry, not a failure to log.
      authError = new AuthError(503, busy.code, db.message, { retryAfter: 1 });
    } else if (
      (error as { validation?: unknown }).validation ||
      (error as { statusCode?: number }).statusCode === 400
    ) {
      authError = validationFailed((error as Error).message);
    } else if (
      typeof (error as { statusCode?: number }).statusCode === "number" &&
      (error as { statusCode: number }).statusCode < 500
    ) {
      const e = error as { statusCode: number; message: string };
      authError = new AuthError(
        e.statusCode,
        e.statusCode === 413 ? "request_too_large" : "bad_request",
        e.message,
      );
    } else if (asDbError(error)?.sqlstate === "57014") {
      // A cancelled statement: GoTrue's own code for a request that took too long.
      request.log.warn({ sqlstate: "57014" }, "auth statement cancelled (statement timeout)");
      authError = new AuthError(504, "request_timeout", "Processing this request timed out, please retry it");
    } else {
      request.log.error({ err: error }, "auth request failed");
      authError = new AuthError(
        500,
        "unexpected_failure",
        "Unexpected failure, please check the server logs",
      );
    }
    if (version) reply.header("X-Supabase-Api-Version", version);
    if (authError.retryAfter) reply.header("Retry-After", String(authError.retryAfter));
    return reply.status(authError.status).send(authErrorBody(authError, version));
  });

  // Every route: the apikey decides the tenant, a bearer the user.
  app.addHook("onRequest", async (request, reply) => {
    const version = request.headers[VERSION_HEADER];
    if (typeof version === "string") reply.header("X-Supabase-Api-Version", version);
    // Open routes: health, and the link in an e-mail (a mail client sends no apikey; the link's
    // token names its tenant).
    const path = request.url.split("?")[0] ?? "";
    if (path.endsWith("/health") || (request.method === "GET" && path.endsWith("/verify"))) return;
    // The provider sends the browser back to /callback: the state names the flow and its tenant.
    if (path.endsWith("/callback")) return;
    // signInWithOAuth sends the browser here: the tenant's apikey comes as a query parameter
    // (options.queryParams.apikey); without it no tenant's provider is found (src/auth/oidc-routes.ts).
    if (
      request.method === "GET" &&
      path.endsWith("/authorize") &&
      !path.endsWith("/identities/authorize") &&
      !apikeyOf(request)
    )
      return;
    const identified = await identify(directory, request);
    if (identified.ok) {
      request.caller = identified.caller;
      return;
    }
    const f = identified.failure;
    switch (f.kind) {
      case "no_apikey":
        return reply.status(401).send({
          message: "No API key found in request",
          hint: "No `apikey` request header or url param was found.",
        });
      case "invalid_apikey":
        return reply.status(401).send({
          message: "Invalid API key",
          hint: "Double check your Supabase `anon` or `service_role` API key.",
        });
      case "no_authorization": // not asked for here: auth routes accept the apikey alone
      case "expired_jwt":
        throw new AuthError(
          403,
          "bad_jwt",
          "invalid JWT: unable to parse or verify signature, token has expired",
        );
      case "wrong_tenant":
        throw new AuthError(403, "bad_jwt", "invalid JWT: the token was issued for another project");
      case "bad_jwt":
        throw new AuthError(403, "bad_jwt", `invalid JWT: unable to parse or verify signature, ${f.message}`);
    }
  });

  app.get("/health", async () => ({
    name: "Backline Auth",
    description: "GoTrue-compatible auth for Backline",
    version: "v1",
  }));

  app.get("/settings", async (request) => auth.settings(info(request)));

  // The tenant's published signing keys (public halves only), which supabase-js's getClaims()
  // verifies sessions with (docs/auth.md, "Signing keys"). The apikey names the tenant, as on
  // every route; `?apikey=` serves a verifier that cannot send headers.
  app.get("/.well-known/jwks.json", async (request, reply) => {
    if (!request.caller) throw new Error("auth route without a caller");
    reply.header("Cache-Control", "public, max-age=60");
    return jwks(request.caller.tenant.signing);
  });

  app.post("/signup", async (request) =>
    auth.signup(info(request), body(request), query(request, "redirect_to")),
  );

  app.post("/token", async (request) => {
    const grant = query(request, "grant_type");
    if (grant === "password") return auth.signInWithPassword(info(request), body(request));
    if (grant === "refresh_token") return auth.refresh(info(request), body(request));
    // GoTrue's answers for the grants of features Backline does not offer (docs/auth.md).
    if (grant === "id_token") throw idTokenProviderDisabled(body(request));
    if (grant === "web3") throw new AuthError(422, "web3_provider_disabled", "Web3 provider is disabled");
    // exchangeCodeForSession: the code a sign-in with a provider ended with (src/auth/oidc.ts).
    if (grant === "pkce")
      return auth.oidc.exchangeCode(sessionContext(info(request).tenant, publicUrl, request), body(request));
    throw new AuthError(400, "invalid_credentials", "unsupported_grant_type");
  });

  app.get("/user", async (request) => auth.getUser(info(request), tokenUser(request)));

  app.put("/user", async (request) =>
    auth.updateUser(info(request), tokenUser(request), body(request), query(request, "redirect_to")),
  );

  app.post("/resend", async (request) =>
    auth.resend(info(request), body(request), query(request, "redirect_to")),
  );

  app.get("/reauthenticate", async (request) => auth.reauthenticate(info(request), tokenUser(request)));

  app.post("/logout", async (request, reply) => {
    const scope = query(request, "scope") ?? "global";
    if (!(SCOPES as readonly string[]).includes(scope))
      throw validationFailed(`scope must be one of ${SCOPES.join(", ")}`);
    await auth.logout(info(request), tokenUser(request), scope as (typeof SCOPES)[number]);
    return reply.status(204).send();
  });

  // Multi-factor authentication (supabase-js auth.mfa): TOTP factors.
  app.post("/factors", async (request) =>
    auth.enrollFactor(info(request), tokenUser(request), body(request)),
  );

  app.post("/factors/:id/challenge", async (request) =>
    auth.challengeFactor(info(request), tokenUser(request), (request.params as { id: string }).id),
  );

  app.post("/factors/:id/verify", async (request) =>
    auth.verifyFactor(
      info(request),
      tokenUser(request),
      (request.params as { id: string }).id,
      body(request),
    ),
  );

  app.delete("/factors/:id", async (request) =>
    auth.unenrollFactor(info(request), tokenUser(request), (request.params as { id: string }).id),
  );

  app.post("/otp", async (request) =>
    auth.signInWithOtp(info(request), body(request), query(request, "redirect_to")),
  );

  app.post("/recover", async (request) =>
    auth.recover(info(request), body(request), query(request, "redirect_to")),
  );

  // auth.admin.inviteUserByEmail: the tenant's service-role key only, as GoTrue's admin endpoints.
  app.post("/invite", async (request) => {
    requireAdmin(request);
    return auth.invite(info(request), body(request), query(request, "redirect_to"));
  });

  await adminRoutes(app, auth);
  await passkeyRoutes(app, auth.passkeys);
  await oidcRoutes(app, { auth, directory, oidc: auth.oidc, publicUrl });
  await unsupportedRoutes(app);

  // Any other path: GoTrue's JSON error shape, so auth-js shows a message (not Backline's problem+json).
  app.setNotFoundHandler(async (request) => {
    const path = request.url.split("?")[0] ?? "";
    throw new AuthError(404, "not_found", `No API route for ${request.method} ${path}`);
  });

  app.post("/verify", async (request) => {
    const b = body(request);
    if (b.type === "sms" || b.type === "phone_change")
      throw new AuthError(400, "phone_provider_disabled", "Unsupported phone provider");
    const type = typeof b.type === "string" ? VERIFY_TYPES[b.type] : undefined;
    if (!type)
      throw validationFailed("type must be one of signup, email, magiclink, recovery, email_change, invite");
    if (typeof b.token_hash === "string" && b.token_hash !== "")
      return auth.verify(info(request), { type, tokenHash: b.token_hash });
    if (typeof b.email === "string" && typeof b.token === "string" && b.token !== "") {
      return auth.verify(info(request), { type, email: validateEmail(b.email), otp: b.token.trim() });
    }
    if (typeof b.phone === "string" && b.phone !== "")
      throw new AuthError(400, "phone_provider_disabled", "Unsupported phone provider");
    throw validationFailed("Verify requires either a token_hash, or an email and a token");
  });

  // The link in an e-mail: uses the token and sends the browser on, with the session in the URL fragment.
  app.get("/verify", async (request, reply) => verifyLink(auth, directory, request, reply));
}

async function verifyLink(
  auth: AuthService,
  directory: TenantDirectory,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const token = query(request, "token");
  const tenantId = token ? await auth.tenantOfLinkToken(token) : undefined;
  const tenant = tenantId ? await directory.get(tenantId) : undefined;
  if (!tenant) return linkPage(reply);
  const req: RequestInfo = { tenant, ip: request.ip, userAgent: request.headers["user-agent"] };
  const settings = authSettings(tenant.settings);
  const wanted = query(request, "redirect_to");
  const target =
    wanted && (redirectAllowed(settings, wanted) || auth.isOwnAppUrl(tenant, wanted))
      ? wanted
      : (settings.site_url ?? auth.portalCallbackUrl(tenant));
  const type = VERIFY_TYPES[query(request, "type") ?? ""];
  let fragment: URLSearchParams;
  try {
    if (!type || !token) throw validationFailed("The link is incomplete");
    const session = (await auth.verify(req, { type, tokenHash: token })) as Record<string, unknown>;
    fragment = new URLSearchParams({
      access_token: String(session.access_token),
      expires_at: String(session.expires_at),
      expires_in: String(session.expires_in),
      refresh_token: String(session.refresh_token),
      token_type: "bearer",
      type: query(request, "type") ?? type,
    });
  } catch (error) {
    if (!(error instanceof AuthError)) throw error;
    fragment = new URLSearchParams({
      error: "access_denied",
      error_code: error.code,
      error_description: error.message,
    });
  }
  const url = new URL(target);
  url.hash = fragment.toString();
  return reply.redirect(url.toString(), 303);
}

/** A link whose token names no tenant (never issued, or its tenant is gone): a page of our own. */
function linkPage(reply: FastifyReply) {
  return reply
    .status(403)
    .type("text/html; charset=utf-8")
    .send(
      '<!doctype html><meta charset="utf-8"><title>Backline</title><p>This link has expired or was already used.</p>',
    );
}
