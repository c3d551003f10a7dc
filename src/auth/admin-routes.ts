import type { FastifyInstance, FastifyRequest } from "fastify";
import { bearerOf } from "../http/gateway.ts";
import { DEFAULT_PER_PAGE, MAX_PER_PAGE } from "./admin.ts";
import { AuthError, validationFailed } from "./errors.ts";
import type { AuthService } from "./service.ts";

/**
 * /auth/v1/admin/* (supabase-js `auth.admin`), as GoTrue answers it: the tenant's service-role key
 * as the bearer, else 401 no_authorization (no bearer) or 403 not_admin (the anon key, a user's
 * token). The tenant is the key's; nothing here reaches another tenant's users, nor staff of any
 * tenant (users.ts, NOT_STAFF).
 */

/** GoTrue's requireAdminCredentials: the tenant's service-role key, or its error. */
export function requireAdmin(request: FastifyRequest): void {
  if (!bearerOf(request))
    throw new AuthError(401, "no_authorization", "This endpoint requires a valid Bearer token");
  if (request.caller?.claims.role !== "tenant_service")
    throw new AuthError(403, "not_admin", "User not allowed");
}

function objectBody(request: FastifyRequest): Record<string, unknown> {
  const b = request.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== "object" || Array.isArray(b))
    throw validationFailed("The request body must be a JSON object");
  return b as Record<string, unknown>;
}

function pageParam(request: FastifyRequest, name: string, fallback: number, max: number): number {
  const raw = (request.query as Record<string, unknown> | undefined)?.[name];
  if (raw === undefined || raw === "") return fallback;
  const n = typeof raw === "string" && /^\d{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw validationFailed(`Bad Pagination Parameters: ${name} must be a whole number from 1 to ${max}`);
  return n;
}

const userId = (request: FastifyRequest) => (request.params as { id: string }).id;

export async function adminRoutes(app: FastifyInstance, auth: AuthService): Promise<void> {
  const admin = auth.admin;
  const tenantOf = (request: FastifyRequest) => {
    requireAdmin(request);
    if (!request.caller) throw new Error("admin route without a caller");
    return { tenant: request.caller.tenant };
  };

  app.get("/admin/users", async (request, reply) => {
    const req = tenantOf(request);
    const page = pageParam(request, "page", 1, 1_000_000_000);
    const perPage = pageParam(request, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE);
    const { users, total } = await admin.listUsers(req, page, perPage);
    // GoTrue's headers: the next page (if any) and the last, and the total. auth-js reads the
    // page numbers from them, so `page` comes first in each link.
    const totalPages = Math.ceil(total / perPage);
    const path = (request.url.split("?")[0] ?? "").replace(/\/+$/, "");
    const link = (p: number) => `<${path}?page=${p}&per_page=${perPage}>`;
    const links = [
      ...(totalPages > page ? [`${link(page + 1)}; rel="next"`] : []),
      `${link(totalPages)}; rel="last"`,
    ];
    reply.header("Link", links.join(", "));
    reply.header("X-Total-Count", String(total));
    return { users, aud: "authenticated" };
  });

  app.post("/admin/users", async (request) => admin.createUser(tenantOf(request), objectBody(request)));

  app.get("/admin/users/:id", async (request) => admin.getUser(tenantOf(request), userId(request)));

  app.put("/admin/users/:id", async (request) =>
    admin.updateUser(tenantOf(request), userId(request), objectBody(request)),
  );

  app.delete("/admin/users/:id", async (request) => {
    const req = tenantOf(request);
    const soft = objectBody(request).should_soft_delete;
    if (soft !== undefined && typeof soft !== "boolean")
      throw validationFailed("should_soft_delete must be a boolean");
    return admin.deleteUser(req, userId(request), soft === true);
  });

  app.get("/admin/users/:id/factors", async (request) =>
    admin.listFactors(tenantOf(request), userId(request)),
  );

  app.delete("/admin/users/:id/factors/:factorId", async (request) =>
    admin.deleteFactor(tenantOf(request), userId(request), (request.params as { factorId: string }).factorId),
  );

  // auth-js sends the redirect as `?redirect_to=`; GoTrue also reads `redirect_to` in the body.
  app.post("/admin/generate_link", async (request) => {
    const req = tenantOf(request);
    const body = objectBody(request);
    const fromQuery = (request.query as Record<string, unknown> | undefined)?.redirect_to;
    return admin.generateLink(req, body, body.redirect_to ?? fromQuery);
  });
}
