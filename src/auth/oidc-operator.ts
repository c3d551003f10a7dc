import { z } from "zod";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import { Timestamp } from "../http/formats.ts";
import { findTenant } from "../tenancy/tenants.ts";
import { checkIssuer, PRESETS } from "./oidc.ts";

/**
 * A tenant's OpenID Connect providers, the operator's side (docs/auth.md, "OpenID Connect
 * providers"): `backline auth providers` and /admin/v1/auth/providers. The client secret is sealed
 * with the server's master key as it is written, and never returned: a provider shows
 * `client_secret_set` instead.
 */

export class OidcProviderError extends Error {
  readonly status: number;
  readonly field: string | undefined;
  constructor(status: number, message: string, field?: string) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export const ProviderName = z
  .string()
  .regex(/^[a-z0-9_-]{1,40}$/, "a name of 1 to 40 lowercase letters, digits, '-' or '_'")
  .refine(
    (n) => !["email", "phone", "anonymous", "sso"].includes(n),
    "that name is an identity provider of its own",
  )
  .meta({
    description: "The name signInWithOAuth gives: google and apple fill in the rest.",
    example: "google",
  });

export const ProviderInput = z.strictObject({
  display_name: z.string().trim().min(1).max(60).optional().meta({
    description: "What the portal's button says: Continue with <display_name>. A preset's own by default.",
  }),
  issuer: z
    .string()
    .max(500)
    .optional()
    .meta({
      description:
        "The provider's issuer (its discovery document is <issuer>/.well-known/openid-configuration); https. " +
        "Google's and Apple's by default for those names.",
      example: "https://accounts.google.com",
    }),
  client_id: z.string().min(1).max(500).optional().meta({ description: "The client id the provider gave." }),
  client_secret: z.string().min(1).max(4000).optional().meta({
    description: "The client secret (Apple: the signed client-secret JWT). Sealed at rest; never returned.",
  }),
  scopes: z.string().max(500).optional().meta({
    description: "Space-separated scopes (openid is always asked)",
    example: "openid email profile",
  }),
  enabled: z.boolean().optional().meta({ description: "Whether sign-in with it is on (default true)." }),
});
export type ProviderInputT = z.infer<typeof ProviderInput>;

export const ProviderOutput = z
  .object({
    name: z.string(),
    display_name: z.string(),
    issuer: z.string(),
    client_id: z.string(),
    client_secret_set: z
      .boolean()
      .meta({ description: "Whether a client secret is kept (it is never shown)." }),
    scopes: z.string(),
    enabled: z.boolean(),
    callback_url: z.string().meta({ description: "The redirect URI to register with the provider." }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "AuthProvider" });
export type ProviderOutputT = z.infer<typeof ProviderOutput>;

interface Row {
  name: string;
  display_name: string;
  issuer: string;
  client_id: string;
  client_secret_set: boolean;
  scopes: string;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `name, display_name, issuer, client_id, client_secret_sealed is not null as client_secret_set,
  scopes, enabled, created_at, updated_at`;

function shape(row: Row, publicUrl: string): ProviderOutputT {
  return {
    ...row,
    callback_url: `${publicUrl}/auth/v1/callback`,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function listProviders(db: Db, tenantId: string, publicUrl: string): Promise<ProviderOutputT[]> {
  const rows = await db.asService(
    async (tx) =>
      (
        await tx.query<Row>(
          `select ${COLUMNS} from internal.oidc_providers where tenant_id = $1 order by name`,
          [tenantId],
        )
      ).rows,
    { readOnly: true },
  );
  return rows.map((r) => shape(r, publicUrl));
}

/**
 * Sets up a provider or changes one (only the fields given). A new one needs a client id, and an
 * issuer unless its name is a preset's.
 */
export async function putProvider(
  db: Db,
  tenantId: string,
  name: string,
  input: ProviderInputT,
  publicUrl: string,
): Promise<{ provider: ProviderOutputT; created: boolean }> {
  let issuer: string | undefined;
  if (input.issuer !== undefined) {
    try {
      issuer = checkIssuer(input.issuer);
    } catch (error) {
      throw new OidcProviderError(400, (error as Error).message, "issuer");
    }
  }
  const sealed = input.client_secret !== undefined ? db.secrets.encrypt(input.client_secret) : undefined;
  return db.asService(async (tx) => {
    const existing = (
      await tx.query<{ id: string }>(
        "select id from internal.oidc_providers where tenant_id = $1 and name = $2 for update",
        [tenantId, name],
      )
    ).rows[0];
    const preset = PRESETS[name];
    let row: Row | undefined;
    try {
      if (!existing) {
        const iss = issuer ?? preset?.issuer;
        if (!iss)
          throw new OidcProviderError(400, `issuer is required for a provider named ${name}`, "issuer");
        if (!input.client_id) throw new OidcProviderError(400, "client_id is required", "client_id");
        row = (
          await tx.query<Row>(
            `insert into internal.oidc_providers (tenant_id, name, display_name, issuer, client_id, client_secret_sealed,
               scopes, enabled)
             values ($1, $2, $3, $4, $5, $6, $7, $8) returning ${COLUMNS}`,
            [
              tenantId,
              name,
              input.display_name ?? preset?.display_name ?? name,
              iss,
              input.client_id,
              sealed ?? null,
              input.scopes ?? preset?.scopes ?? "openid email profile",
              input.enabled ?? true,
            ],
          )
        ).rows[0];
      } else {
        row = (
          await tx.query<Row>(
            `update internal.oidc_providers set display_name = coalesce($3, display_name), issuer = coalesce($4, issuer),
               client_id = coalesce($5, client_id), client_secret_sealed = coalesce($6, client_secret_sealed),
               scopes = coalesce($7, scopes), enabled = coalesce($8, enabled)
             where tenant_id = $1 and name = $2 returning ${COLUMNS}`,
            [
              tenantId,
              name,
              input.display_name ?? null,
              issuer ?? null,
              input.client_id ?? null,
              sealed ?? null,
              input.scopes ?? null,
              input.enabled ?? null,
            ],
          )
        ).rows[0];
      }
    } catch (error) {
      if (asDbError(error)?.sqlstate === "23514")
        throw new OidcProviderError(400, "the provider's settings are not valid");
      throw error;
    }
    if (!row) throw new Error("oidc_providers write returned no row");
    return { provider: shape(row, publicUrl), created: !existing };
  });
}

/** Removes a provider; its users keep their identities (they sign in again once it is back). */
export async function removeProvider(db: Db, tenantId: string, name: string): Promise<boolean> {
  return db.asService(
    async (tx) =>
      (
        await tx.query("delete from internal.oidc_providers where tenant_id = $1 and name = $2", [
          tenantId,
          name,
        ])
      ).rowCount > 0,
  );
}

/** The tenant a command names (slug or id). */
export async function tenantIdOf(db: Db, slugOrId: string): Promise<string> {
  const tenant = await db.asService((tx) => findTenant(tx, slugOrId), { readOnly: true });
  if (!tenant) throw new OidcProviderError(404, `no tenant ${slugOrId}`, "tenant");
  return tenant.id;
}
