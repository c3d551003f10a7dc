import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireAdmin } from "./admin-routes.ts";
import { AuthError } from "./errors.ts";

/**
 * GoTrue endpoints Backline does not offer (docs/auth.md, "What /auth/v1 answers"), answered as
 * GoTrue answers them when the feature is turned off, so auth-js shows its usual message instead
 * of a bare 404: SAML single sign-on, Backline as an OAuth server. Phone and Web3 sign-ins are
 * refused where their requests land (/signup, /otp, /verify, /token: src/auth/routes.ts and service.ts).
 */

const samlDisabled = () => new AuthError(404, "saml_provider_disabled", "SAML 2.0 is disabled");
const oauthServerDisabled = () => new AuthError(404, "feature_disabled", "OAuth server is disabled");

/** The OAuth providers GoTrue knows by name; any other name "could not be found". */
const KNOWN_PROVIDERS = new Set([
  "apple",
  "azure",
  "bitbucket",
  "discord",
  "facebook",
  "figma",
  "fly",
  "github",
  "gitlab",
  "google",
  "kakao",
  "keycloak",
  "linkedin",
  "linkedin_oidc",
  "notion",
  "slack",
  "slack_oidc",
  "snapchat",
  "spotify",
  "twitch",
  "twitter",
  "vercel_marketplace",
  "workos",
  "x",
  "zoom",
]);

/** GoTrue's answer to an OAuth sign-in with a provider that is not turned on. */
export function providerNotEnabled(provider: string): AuthError {
  const name = provider.toLowerCase();
  return new AuthError(
    400,
    "validation_failed",
    KNOWN_PROVIDERS.has(name)
      ? "Unsupported provider: provider is not enabled"
      : `Unsupported provider: Provider ${provider} could not be found`,
  );
}

const ISSUERS: Record<string, string> = {
  google: "https://accounts.google.com",
  apple: "https://appleid.apple.com",
  azure: "https://login.microsoftonline.com/common/v2.0",
  facebook: "https://www.facebook.com",
  kakao: "https://kauth.kakao.com",
};

/** POST /token?grant_type=id_token (signInWithIdToken): no provider is turned on. */
export function idTokenProviderDisabled(body: Record<string, unknown>): AuthError {
  const provider = typeof body.provider === "string" ? body.provider : "";
  const issuer =
    typeof body.issuer === "string" && body.issuer !== "" ? body.issuer : (ISSUERS[provider] ?? provider);
  return new AuthError(
    400,
    "provider_disabled",
    `Provider (issuer ${JSON.stringify(issuer)}) is not enabled`,
  );
}

export async function unsupportedRoutes(app: FastifyInstance): Promise<void> {
  const refuse = (error: () => AuthError) => async () => {
    throw error();
  };
  const adminRefuse = (error: () => AuthError) => async (request: FastifyRequest) => {
    requireAdmin(request);
    throw error();
  };

  // SAML single sign-on (signInWithSSO) and its admin API.
  app.post("/sso", refuse(samlDisabled));
  app.all("/sso/*", refuse(samlDisabled));
  app.all("/admin/sso/*", adminRefuse(samlDisabled));

  // Sign-in with an OAuth provider and linking identities: src/auth/oidc-routes.ts.

  // Backline as an OAuth 2.1 server (auth.oauth, auth.admin.oauth).
  app.all("/oauth/*", refuse(oauthServerDisabled));
  app.all("/admin/oauth/*", adminRefuse(oauthServerDisabled));
  app.all("/user/oauth/*", refuse(oauthServerDisabled));

  // Custom OAuth and OIDC providers' admin API.
  const customDisabled = () => new AuthError(404, "feature_disabled", "Custom OAuth providers are disabled");
  app.all("/admin/custom-providers", adminRefuse(customDisabled));
  app.all("/admin/custom-providers/*", adminRefuse(customDisabled));
  app.get("/.well-known/oauth-authorization-server", refuse(oauthServerDisabled));
}
