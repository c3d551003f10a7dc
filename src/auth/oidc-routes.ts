import type { FastifyInstance, FastifyRequest } from "fastify";
import { bearerOf } from "../http/gateway.ts";
import type { TenantAuthInfo, TenantDirectory } from "../tenancy/directory.ts";
import { AuthError } from "./errors.ts";
import { type OidcFlows, passThrough } from "./oidc.ts";
import type { AuthService } from "./service.ts";
import type { SessionContext } from "./sessions.ts";
import { authSettings, redirectAllowed } from "./settings.ts";
import { providerNotEnabled } from "./unsupported-routes.ts";

/**
 * /auth/v1's routes of sign-in with a tenant's OpenID Connect providers (src/auth/oidc.ts,
 * docs/auth.md "OpenID Connect providers"): GET /authorize (signInWithOAuth), GET and POST
 * /callback (where the provider sends the browser back), GET /user/identities/authorize
 * (linkIdentity) and DELETE /user/identities/{id} (unlinkIdentity). POST /token?grant_type=pkce
 * (exchangeCodeForSession) is src/auth/routes.ts's, which calls `OidcFlows.exchangeCode`.
 */

function queryOf(request: FastifyRequest): Record<string, unknown> {
  return (request.query as Record<string, unknown> | undefined) ?? {};
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** The session context of a tenant's request (what AuthService's flows use). */
export function sessionContext(
  tenant: TenantAuthInfo,
  publicUrl: string,
  request: FastifyRequest,
): SessionContext {
  return {
    tenant,
    settings: authSettings(tenant.settings),
    issuer: `${publicUrl}/auth/v1`,
    userAgent: request.headers["user-agent"],
    ip: request.ip,
  };
}

/** GoTrue's answer when a tenant has not turned manual linking on. */
const linkingDisabled = () => new AuthError(404, "manual_linking_disabled", "Manual linking is disabled");

export async function oidcRoutes(
  app: FastifyInstance,
  opts: { auth: AuthService; directory: TenantDirectory; oidc: OidcFlows; publicUrl: string },
): Promise<void> {
  const { auth, directory, oidc, publicUrl } = opts;

  /** redirect_to when the tenant allows it (its URI allow list, or its own apps), else its site URL. */
  const redirectTarget = (tenant: TenantAuthInfo, wanted: string | undefined): string => {
    const settings = authSettings(tenant.settings);
    return wanted && (redirectAllowed(settings, wanted) || auth.isOwnAppUrl(tenant, wanted))
      ? wanted
      : (settings.site_url ?? auth.portalCallbackUrl(tenant));
  };

  const start = async (request: FastifyRequest, linkUserId: string | undefined) => {
    const q = queryOf(request);
    const provider = str(q.provider) ?? "";
    const tenant = request.caller?.tenant;
    // The browser came without the tenant's apikey (signInWithOAuth's options.queryParams.apikey):
    // no tenant, so no provider of its.
    if (!tenant) throw providerNotEnabled(provider);
    return oidc.authorize(tenant.id, {
      provider,
      redirectTo: redirectTarget(tenant, str(q.redirect_to)),
      codeChallenge: str(q.code_challenge),
      codeChallengeMethod: str(q.code_challenge_method),
      scopes: str(q.scopes),
      extra: passThrough(q),
      linkUserId,
    });
  };

  // signInWithOAuth: the browser is sent here, then on to the provider.
  app.get("/authorize", async (request, reply) => {
    const url = await start(request, undefined);
    if (queryOf(request).skip_http_redirect === "true") return { url };
    return reply.redirect(url, 302);
  });

  // linkIdentity: auth-js asks with the session (skip_http_redirect=true) and opens the URL itself.
  app.get("/user/identities/authorize", async (request, reply) => {
    const tenant = request.caller?.tenant;
    if (!tenant || !authSettings(tenant.settings).manual_linking) throw linkingDisabled();
    const user = signedIn(request);
    const url = await start(request, user);
    if (queryOf(request).skip_http_redirect === "true") return { url };
    return reply.redirect(url, 302);
  });

  app.delete("/user/identities/:id", async (request) => {
    const tenant = request.caller?.tenant;
    if (!tenant || !authSettings(tenant.settings).manual_linking) throw linkingDisabled();
    const user = signedIn(request);
    const id = (request.params as { id: string }).id;
    if (!/^[0-9a-f-]{36}$/i.test(id))
      throw new AuthError(404, "identity_not_found", "Identity doesn't exist");
    await oidc.unlink(tenant.id, user, id);
    return {};
  });

  // The provider sends the browser back (a form post with response_mode=form_post, Apple's).
  const callback = async (request: FastifyRequest, params: Record<string, unknown>) => {
    const given: Record<string, string | undefined> = {};
    for (const k of ["state", "code", "error", "error_description"]) given[k] = str(params[k]);
    return oidc.callback(given, async (tenantId) => {
      const tenant = await directory.get(tenantId);
      if (!tenant) throw new AuthError(400, "bad_oauth_state", "OAuth callback with invalid state");
      return sessionContext(tenant, publicUrl, request);
    });
  };
  app.get("/callback", async (request, reply) =>
    reply.redirect(await callback(request, queryOf(request)), 302),
  );
  app.register(async (form) => {
    form.addContentTypeParser(
      "application/x-www-form-urlencoded",
      { parseAs: "string", bodyLimit: 64 * 1024 },
      (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
    );
    form.post("/callback", async (request, reply) =>
      // 303: the browser follows a form post with a GET.
      reply.redirect(await callback(request, (request.body as Record<string, unknown> | null) ?? {}), 303),
    );
  });
}

function signedIn(request: FastifyRequest): string {
  if (!bearerOf(request))
    throw new AuthError(401, "no_authorization", "This endpoint requires a Bearer token");
  const user = request.caller?.user;
  if (!user) throw new AuthError(403, "bad_jwt", "invalid claim: missing sub claim");
  return user.id;
}
