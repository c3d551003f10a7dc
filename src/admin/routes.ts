import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { operatorScope } from "../db/operator-scope.ts";
import { deliveriesOf, reportDelivery, retryDeliveries } from "../pipeline/delivery.ts";
import { decideOac, oacQueue } from "../pipeline/oac.ts";
import { decideReview, reviewQueue } from "../pipeline/review.ts";
import { royaltyAdminRoutes } from "../royalties/admin.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { type AdminCaller, adminCaller, operatorCallerOf } from "./auth.ts";
import { adminErrorHandler } from "./errors.ts";
import { Bodies, parseBody, pathId } from "./input.ts";
import { meRoutes } from "./me.ts";
import { decision, delivery, oacRequest, queuedRelease } from "./output.ts";

/**
 * /admin/v1 (docs/operator.md, "The admin API"): the operator's commands (`backline releases
 * queue|review`, `deliveries list|retry|report`, `oac queue|review`) over HTTP, for a tenant's
 * operator team. Every request carries the tenant's service-role key (src/admin/auth.ts) and
 * reaches only that tenant's releases, deliveries and requests: the pipeline's operator functions
 * run with `{ tenantId }`, so another tenant's id is not_found exactly as a missing one is. The
 * pipeline decides (and refuses, with an OperatorError); this file only translates.
 */
export interface AdminOptions {
  db: Db;
  directory: TenantDirectory;
  /** ROYALTY_IMPORT_MAX_BYTES. */
  royaltyImportMaxBytes: number;
}

export async function adminRoutes(app: FastifyInstance, options: AdminOptions): Promise<void> {
  const { db, directory } = options;
  const callers = new WeakMap<FastifyRequest, AdminCaller>();
  const callerOf = (request: FastifyRequest): AdminCaller => {
    const caller = callers.get(request);
    if (!caller) throw new Error("admin request without an authenticated caller");
    return caller;
  };
  const scope = (request: FastifyRequest): { tenantId: string } => ({ tenantId: callerOf(request).tenantId });

  // Only JSON bodies: a text/plain body is 415, not a string handed to the handlers.
  app.removeContentTypeParser("text/plain");
  app.setErrorHandler(adminErrorHandler);
  // Who is calling comes first: an unauthenticated request learns nothing about ids or bodies.
  // The route's config.staffRole decides the role needed (src/admin/auth.ts; "admin" when absent).
  app.addHook("onRequest", async (request, reply) => {
    reply.header("cache-control", "no-store");
    callers.set(request, await adminCaller(db, directory, request, reply));
  });
  // The handler runs in the operator scope: each operator transaction it opens starts with the
  // database's own staff check, for this caller, tenant and role (src/db/operator-scope.ts).
  app.addHook("preHandler", (request, _reply, done) => {
    const caller = callers.get(request);
    const operator = caller ? operatorCallerOf(caller) : undefined;
    if (operator) operatorScope.run(operator, done);
    else done();
  });

  app.register(meRoutes, { db, callerOf });

  // Review.
  app.get("/reviews", { config: { staffRole: "reviewer" } }, async (request) => ({
    data: (await reviewQueue(db, scope(request).tenantId)).map(queuedRelease),
  }));

  app.post("/releases/:id/approve", { config: { staffRole: "reviewer" } }, async (request) => {
    const id = pathId(request.params, "release");
    parseBody(Bodies.empty, request.body, { optional: true });
    return decision(await decideReview(db, id, { approve: true }, scope(request)));
  });

  app.post(
    "/releases/:id/reject",
    { config: { reasonParam: "reason", staffRole: "reviewer" } },
    async (request) => {
      const id = pathId(request.params, "release");
      const { reason } = parseBody(Bodies.reject, request.body);
      return decision(await decideReview(db, id, { approve: false, reason }, scope(request)));
    },
  );

  // Delivery.
  app.get("/releases/:id/deliveries", { config: { staffRole: "operator" } }, async (request) => {
    const id = pathId(request.params, "release");
    return { data: (await deliveriesOf(db, id, scope(request))).map(delivery) };
  });

  app.post("/releases/:id/deliveries/retry", { config: { staffRole: "operator" } }, async (request) => {
    const id = pathId(request.params, "release");
    parseBody(Bodies.empty, request.body, { optional: true });
    return { release_id: id, retried: await retryDeliveries(db, id, scope(request)) };
  });

  app.post(
    "/deliveries/:id/report",
    { config: { reasonParam: "message", staffRole: "operator" } },
    async (request) => {
      const id = pathId(request.params, "delivery");
      const report = parseBody(Bodies.report, request.body);
      return delivery(await reportDelivery(db, id, report, { ...scope(request), via: "admin_api" }));
    },
  );

  // Royalty report imports (docs/royalties.md): an encapsulated plugin, so that its raw report
  // bodies (text/csv, application/octet-stream, ...) reach its upload route only.
  app.register(royaltyAdminRoutes, {
    db,
    tenantOf: (request: FastifyRequest) => scope(request).tenantId,
    maxBytes: options.royaltyImportMaxBytes,
  });

  // Official Artist Channel requests.
  app.get("/oac-requests", { config: { staffRole: "reviewer" } }, async (request) => ({
    data: (await oacQueue(db, scope(request).tenantId)).map(oacRequest),
  }));

  app.post("/oac-requests/:id/approve", { config: { staffRole: "reviewer" } }, async (request) => {
    const id = pathId(request.params, "OAC request");
    const { note } = parseBody(Bodies.oacApprove, request.body, { optional: true });
    return decision(
      await decideOac(db, id, { approve: true, ...(note !== undefined ? { note } : {}) }, scope(request)),
    );
  });

  app.post(
    "/oac-requests/:id/reject",
    { config: { reasonParam: "reason", staffRole: "reviewer" } },
    async (request) => {
      const id = pathId(request.params, "OAC request");
      const { reason } = parseBody(Bodies.reject, request.body);
      return decision(await decideOac(db, id, { approve: false, reason }, scope(request)));
    },
  );
}
