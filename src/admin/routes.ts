import type { FastifyInstance, FastifyRequest } from "fastify";
import { addOnSpecs } from "../add-ons/admin.ts";
import { oidcProviderSpecs } from "../auth/oidc-admin.ts";
import { billingSpecs } from "../billing/admin.ts";
import type { Db } from "../db/db.ts";
import { operatorScope } from "../db/operator-scope.ts";
import { HttpError } from "../http/problem.ts";
import { sendReferencePage } from "../http/reference-page.ts";
import type { Mailer } from "../mail/mailer.ts";
import { moneySpecs } from "../money/admin.ts";
import { peopleSpecs } from "../people/admin.ts";
import { royaltyAdminRoutes, royaltySpecs } from "../royalties/admin.ts";
import type { TokenSigner } from "../storage/tokens.ts";
import { supportSpecs } from "../support/admin.ts";
import { LOGO_MAX_BYTES, LOGO_TYPES, saveLogo } from "../tenancy/brand-assets.ts";
import { customScriptSpecs } from "../tenancy/custom-scripts.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { partnerSpecs } from "../tenancy/partners.ts";
import { transferAdminRoutes, transferSpecs } from "../transfer/admin.ts";
import { auditSpec } from "./audit.ts";
import { type AdminCaller, adminCaller, operatorCallerOf } from "./auth.ts";
import { deskRoutes, settingsOf } from "./desk.ts";
import { dictionarySpecs } from "./dictionaries.ts";
import { adminErrorHandler } from "./errors.ts";
import { meRoutes, meSpec } from "./me.ts";
import { ADMIN_API_VERSION, adminOpenApiDocument } from "./openapi.ts";
import { type AnyAdminRoute, registerAdminRoutes } from "./spec.ts";

/**
 * /admin/v1 (docs/operator.md, "The admin API"): the operator's desk over HTTP — the commands of
 * `backline releases queue|review`, `deliveries list|retry|report`, `oac queue|review`, and what the
 * console needs besides (src/admin/desk.ts). Every request carries the tenant's service-role key or
 * a staff user's token (src/admin/auth.ts) and reaches only that tenant's releases, deliveries and
 * requests: every read and the pipeline's operator functions run with the tenant, so another
 * tenant's id is not_found exactly as a missing one is. The pipeline decides (and refuses, with an
 * OperatorError); the routes only translate. Each route's spec (src/admin/spec.ts) validates its
 * input and makes the OpenAPI document (GET /admin/v1/openapi.json, src/admin/openapi.ts).
 */
export interface AdminOptions {
  db: Db;
  directory: TenantDirectory;
  /** ROYALTY_IMPORT_MAX_BYTES. */
  royaltyImportMaxBytes: number;
  /** Signs the review page's media URLs (the storage interface's signer). */
  signer: TokenSigner;
  /** PUBLIC_URL. */
  publicUrl: string;
  /** Sends what the operator's acts mail (an approved period's statements). */
  mailer?: Mailer | undefined;
}

/** Every route of /admin/v1, for the document (scripts/openapi.ts makes it without a server). */
export function adminRouteSpecs(
  options: Omit<AdminOptions, "directory">,
  isPlatformAdmin: (request: FastifyRequest) => boolean = () => false,
): AnyAdminRoute[] {
  const tenantOf = () => {
    throw new Error("adminRouteSpecs: tenantOf is set at registration");
  };
  return [
    meSpec,
    ...deskRoutes({
      db: options.db,
      signer: options.signer,
      publicUrl: options.publicUrl,
      isPlatformAdmin,
      mailer: options.mailer,
    }),
    ...royaltySpecs({ db: options.db, tenantOf, maxBytes: options.royaltyImportMaxBytes }),
    ...moneySpecs({
      db: options.db,
      mail: options.mailer ? { mailer: options.mailer, publicUrl: options.publicUrl } : undefined,
    }),
    ...transferSpecs({ db: options.db }),
    ...peopleSpecs({ db: options.db }),
    ...supportSpecs({
      db: options.db,
      mail: options.mailer ? { mailer: options.mailer, publicUrl: options.publicUrl } : undefined,
    }),
    ...customScriptSpecs({ db: options.db }),
    ...partnerSpecs({ db: options.db }),
    ...addOnSpecs({ db: options.db }),
    ...dictionarySpecs({ db: options.db, isPlatformAdmin }),
    ...billingSpecs({ db: options.db, isPlatformAdmin }),
    auditSpec(options.db),
    ...oidcProviderSpecs({ db: options.db, publicUrl: options.publicUrl }),
  ];
}

/**
 * GET /admin/v1/openapi.json: the document, and GET /admin/v1/docs, its interactive reference;
 * without authentication (they hold no data).
 */
export async function adminDocsRoutes(app: FastifyInstance, options: { publicUrl: string }): Promise<void> {
  // Made by its first request, not held from start.
  let doc: ReturnType<typeof adminOpenApiDocument> | undefined;
  app.get("/openapi.json", async (_request, reply) => {
    doc ??= adminOpenApiDocument(
      adminRouteSpecs({
        // The document needs the specs only: their handlers never run here.
        db: undefined as unknown as Db,
        signer: undefined as unknown as TokenSigner,
        publicUrl: options.publicUrl,
        royaltyImportMaxBytes: 0,
      }),
      `${options.publicUrl}/admin/v1`,
    );
    return reply.header("cache-control", "no-cache").type("application/json").send(doc);
  });
  // The interactive reference over that document (src/http/reference-page.ts).
  app.get("/docs", async (_request, reply) =>
    sendReferencePage(reply, options.publicUrl, {
      title: "Backline admin API reference",
      document: "openapi.json",
    }),
  );
}

export { ADMIN_API_VERSION };

export async function adminRoutes(app: FastifyInstance, options: AdminOptions): Promise<void> {
  const { db, directory } = options;
  const callers = new WeakMap<FastifyRequest, AdminCaller>();
  const callerOf = (request: FastifyRequest): AdminCaller => {
    const caller = callers.get(request);
    if (!caller) throw new Error("admin request without an authenticated caller");
    return caller;
  };
  const tenantOf = (request: FastifyRequest): string => callerOf(request).tenantId;
  // Platform staff with the admin role (stores belong to the installation); never a tenant's key.
  const isPlatformAdmin = (request: FastifyRequest): boolean => callerOf(request).platformRole === "admin";

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

  registerAdminRoutes(app, adminRouteSpecs(options, isPlatformAdmin), tenantOf);

  // The royalty report upload: an encapsulated plugin, so that its raw report bodies (text/csv,
  // application/octet-stream, ...) reach its route only.
  app.register(royaltyAdminRoutes, { db, tenantOf, maxBytes: options.royaltyImportMaxBytes });
  // The catalogue transfer upload: the same, for CSV and ERN bodies.
  app.register(transferAdminRoutes, { db, tenantOf });
  // The logo upload: the same, for image bodies.
  app.register(logoUploadRoute, { db, tenantOf, publicUrl: options.publicUrl });
}

async function logoUploadRoute(
  app: FastifyInstance,
  options: { db: Db; tenantOf: (request: FastifyRequest) => string; publicUrl: string },
): Promise<void> {
  const { db, tenantOf, publicUrl } = options;
  // Any image type reaches the handler, which decides from the bytes; the body limit answers 413.
  app.addContentTypeParser(
    /^image\//,
    { parseAs: "buffer", bodyLimit: LOGO_MAX_BYTES },
    (_request, body, done) => done(null, body),
  );
  app.post(
    "/settings/logo",
    { config: { staffRole: "admin" }, bodyLimit: LOGO_MAX_BYTES },
    async (request) => {
      const tenantId = tenantOf(request);
      if (!Buffer.isBuffer(request.body)) {
        throw new HttpError(
          415,
          "unsupported_media_type",
          `Send the logo as the request body with Content-Type ${LOGO_TYPES.join(", ")}.`,
          "logo",
        );
      }
      await saveLogo(db, tenantId, request.body, publicUrl);
      return db.asService((tx) => settingsOf(tx, tenantId), { readOnly: true });
    },
  );
}
