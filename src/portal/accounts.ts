import type { FastifyInstance } from "fastify";
import type { Db } from "../db/db.ts";
import { identify } from "../http/gateway.ts";
import { HttpError } from "../http/problem.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";

/**
 * GET /portal/accounts.json (docs/portal.md, "Accounts"): the accounts the signed-in member
 * belongs to, for the portal's account switcher — `{ user_id, aal, accounts: [{ id, name, kind,
 * role, require_aal2, reachable }] }`, at most 200, oldest membership first. The caller is a
 * user's access token with the tenant's anon key (`apikey`), as on /rest/v1; a key, the anon
 * key alone or another tenant's token is 401.
 *
 * Names and roles of one's own memberships are not catalogue data, and /rest/v1 exposes no
 * memberships table: this is the one thing the portal asks outside supabase-js. The database
 * answers it under the caller's role and claims (auth.my_memberships(), migration 0034). `reachable` is
 * false for an account that requires a second factor (aal2) while the session is aal1 — the
 * catalogue's row security then shows none of its rows, and the portal asks for the code.
 */
export interface PortalAccountsOptions {
  db: Db;
  directory: TenantDirectory;
}

export async function portalAccountsRoutes(
  app: FastifyInstance,
  options: PortalAccountsOptions,
): Promise<void> {
  const { db, directory } = options;
  app.get("/portal/accounts.json", async (request, reply) => {
    const identified = await identify(directory, request, { requireAuthorization: true });
    if (!identified.ok || !identified.caller.user) {
      throw new HttpError(401, "signed_out", "Sign in with a user's access token and the tenant's anon key.");
    }
    const { caller } = identified;
    const user = caller.user as { id: string };
    const aal = caller.claims.aal === "aal2" ? "aal2" : "aal1";
    // The caller's own memberships, asked as the caller: the database reads whose from the
    // verified token's claims (migration 0034).
    const rows = await db.withRequestContext(
      caller.claims,
      async (tx) =>
        (
          await tx.query<{ id: string; name: string; kind: string; role: string; require_aal2: boolean }>(
            "select account_id as id, name, kind, role, require_aal2 from auth.my_memberships()",
          )
        ).rows,
      { readOnly: true },
    );
    reply.header("cache-control", "no-store");
    return {
      user_id: user.id,
      aal,
      accounts: rows.map((r) => ({ ...r, reachable: !r.require_aal2 || aal === "aal2" })),
    };
  });
}
