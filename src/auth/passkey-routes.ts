import type { FastifyInstance, FastifyRequest } from "fastify";
import { requireAdmin } from "./admin-routes.ts";
import type { Passkeys } from "./passkeys.ts";
import { body, info, tokenUser } from "./routes.ts";

/**
 * /auth/v1/passkeys/* (supabase-js auth.passkey, signInWithPasskey, registerPasskey) and the admin
 * API's /admin/users/{id}/passkeys (auth.admin.passkey), as GoTrue routes them (src/auth/passkeys.ts).
 */

const origin = (request: FastifyRequest) =>
  typeof request.headers.origin === "string" ? request.headers.origin : undefined;
const param = (request: FastifyRequest, name: string) =>
  (request.params as Record<string, string | undefined>)[name] ?? "";

export async function passkeyRoutes(app: FastifyInstance, passkeys: Passkeys): Promise<void> {
  // Off for the tenant: GoTrue's 404 passkey_disabled before anything else is asked (a token).
  const on = (request: FastifyRequest) => {
    passkeys.settings(info(request));
    return request;
  };
  app.post("/passkeys/registration/options", async (request) =>
    passkeys.registrationOptions(info(request), tokenUser(on(request)), origin(request)),
  );
  app.post("/passkeys/registration/verify", async (request) =>
    passkeys.registrationVerify(info(request), tokenUser(on(request)), body(request)),
  );
  app.post("/passkeys/authentication/options", async (request) =>
    passkeys.authenticationOptions(info(request), origin(request)),
  );
  app.post("/passkeys/authentication/verify", async (request) =>
    passkeys.authenticationVerify(info(request), body(request)),
  );
  app.get("/passkeys", async (request) => passkeys.list(info(request), tokenUser(on(request))));
  app.patch("/passkeys/:id", async (request) =>
    passkeys.update(info(request), tokenUser(on(request)), param(request, "id"), body(request)),
  );
  app.delete("/passkeys/:id", async (request, reply) => {
    await passkeys.remove(info(request), tokenUser(on(request)), param(request, "id"));
    return reply.status(204).send();
  });

  app.get("/admin/users/:id/passkeys", async (request) => {
    requireAdmin(request);
    return passkeys.adminList(info(request), param(request, "id"));
  });
  app.delete("/admin/users/:id/passkeys/:passkeyId", async (request, reply) => {
    requireAdmin(request);
    await passkeys.adminRemove(info(request), param(request, "id"), param(request, "passkeyId"));
    return reply.status(204).send();
  });
}
