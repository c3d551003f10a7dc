import { z } from "zod";
import { type AnyAdminRoute, adminRoute } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import {
  listProviders,
  OidcProviderError,
  ProviderInput,
  ProviderName,
  ProviderOutput,
  putProvider,
} from "./oidc-operator.ts";

/**
 * /admin/v1/auth/providers: a tenant's OpenID Connect providers (docs/auth.md, "OpenID Connect
 * providers"), for the tenant's admins (its service-role key, its staff with the admin role, the
 * platform's admins acting on it). The client secret goes in and never comes out.
 */

const TAG = "Sign-in providers";
const NameParams = z.object({ name: ProviderName });

function httpError(error: unknown): never {
  if (!(error instanceof OidcProviderError)) throw error;
  throw new HttpError(error.status, "invalid_request", error.message, error.field);
}

export function oidcProviderSpecs(options: { db: Db; publicUrl: string }): AnyAdminRoute[] {
  const { db, publicUrl } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/auth/providers",
      operationId: "listAuthProviders",
      summary: "The tenant's OpenID Connect providers",
      description: "Each with `client_secret_set` in place of its secret, which is never returned.",
      tag: TAG,
      staffRole: "admin",
      response: {
        status: 200,
        description: "The providers, by name.",
        schema: z.object({ data: z.array(ProviderOutput) }),
      },
      handler: async ({ tenantId }) => ({ data: await listProviders(db, tenantId, publicUrl) }),
    }),
    adminRoute({
      method: "POST",
      path: "/auth/providers/{name}",
      operationId: "putAuthProvider",
      summary: "Set up or change an OpenID Connect provider",
      description:
        "Sets up the provider `name` (signInWithOAuth({ provider: name })), or changes the fields given of one " +
        "set up before. `google` and `apple` need only client_id and client_secret; any other name needs its " +
        "issuer. Register `callback_url` as the redirect URI with the provider. The secret is sealed with the " +
        "server's master key.",
      tag: TAG,
      staffRole: "admin",
      params: NameParams,
      body: ProviderInput,
      response: { status: 200, description: "The provider as it is now.", schema: ProviderOutput },
      handler: async ({ tenantId, params, body }) =>
        (await putProvider(db, tenantId, params.name, body, publicUrl).catch(httpError)).provider,
    }),
  ];
}
