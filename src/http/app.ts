import { randomUUID } from "node:crypto";
import path from "node:path";
import cors from "@fastify/cors";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { adminDocsRoutes, adminRoutes } from "../admin/routes.ts";
import { authRoutes } from "../auth/routes.ts";
import { AuthService } from "../auth/service.ts";
import { meterApiCalls } from "../billing/api-calls.ts";
import type { Config } from "../config.ts";
import { consoleStatic, storageMediaOrigins } from "../console/static.ts";
import { TenantConfigs, tenantConfigRoutes } from "../console/tenant-config.ts";
import { requestScope } from "../db/admission.ts";
import { openAuditScope, runWithAuditScope } from "../db/audit-context.ts";
import type { Db } from "../db/db.ts";
import { Mailer } from "../mail/mailer.ts";
import { instrumentHttp } from "../observability/http.ts";
import type { Metrics } from "../observability/metrics.ts";
import { portalAccountsRoutes } from "../portal/accounts.ts";
import { publicApiRoutes } from "../public-api/plugin.ts";
import { restRoutes } from "../rest/routes.ts";
import { loadSchemaCache, SCHEMA_CHANNEL, type SchemaCache } from "../rest/schema-cache.ts";
import { openStorage } from "../storage/open.ts";
import { TUS_REQUEST_HEADERS } from "../storage/resumable.ts";
import { storageRoutes } from "../storage/routes.ts";
import { brandAssetRoutes } from "../tenancy/brand-assets.ts";
import { portalScripts } from "../tenancy/custom-scripts.ts";
import { TenantDirectory } from "../tenancy/directory.ts";
import { loadSecretBox } from "../webhooks/secrets.ts";
import { checkJsonLimits, drainBeforeRefusal } from "./body-limits.ts";
import { closing } from "./graceful.ts";
import { healthRoutes } from "./health.ts";
import { problemErrorHandler, sendProblem } from "./problem.ts";
import { MemoryRateLimiter } from "./rate-limit.ts";
import { redactingLogger } from "./redact.ts";
import { referenceRoutes } from "./reference-page.ts";
import { proxyChainWarning, trustProxyOption } from "./trust-proxy.ts";

export interface AppDeps {
  config: Config;
  db: Db;
  /** A pino logger; tests pass a silent one. */
  logger: Logger;
  /** The process's metrics when the server made them (METRICS_PORT); else made here if /metrics is on. */
  metrics?: Metrics | undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const REQUEST = { request: true } as const;

/**
 * The one app builder: the server, the tests (over real sockets) and scripts all call it. Each
 * interface is a plugin under its prefix (/auth/v1, /rest/v1, /storage/v1, /api/public/v1,
 * /admin/v1) with its own error shape; this file only wires them.
 */
export function buildApp(given: AppDeps): FastifyInstance {
  // Request handlers run under the configured statement timeouts; the caller's db (workers) keeps its own.
  const deps = { ...given, db: given.db.withStatementTimeouts(given.config.statementTimeouts) };
  // Secrets in URLs, headers and errors are redacted before anything is logged (./redact.ts).
  const logger = redactingLogger(deps.logger);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // A caller's X-Request-Id is kept when it is sane, so requests can be traced across services.
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    // request.ip is the client address everywhere; which X-Forwarded-For entries count (./trust-proxy.ts).
    trustProxy: trustProxyOption(deps.config.trustProxy),
    bodyLimit: 1024 * 1024,
    // Close idle keep-alive sockets on shutdown so close() does not wait for them.
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: true },
  });

  // TRUST_PROXY=true and a chain of several addresses: said once in the log (./trust-proxy.ts).
  const noteProxyChain = proxyChainWarning(deps.config.trustProxy);
  // Everything a request does runs in requestScope: its wait for a database connection is bounded.
  app.addHook("onRequest", (request, reply, done) => {
    noteProxyChain?.(request);
    reply.header("x-request-id", request.id);
    // The audit scope (who acts, from which address) is entered here and again before the
    // handler, since reading the body may run outside it (src/db/audit-context.ts).
    const audit = openAuditScope(request);
    requestScope.run(REQUEST, () => runWithAuditScope(audit, done));
  });
  app.addHook("preHandler", (request, _reply, done) => {
    runWithAuditScope(openAuditScope(request), done);
  });
  app.addHook("onSend", async (request, reply) => {
    // 503 is an invitation to come back (a busy database, a process shutting down): say when.
    if (reply.statusCode === 503 && !reply.hasHeader("retry-after")) reply.header("retry-after", "1");
    // A stopping server answers what is in flight, then the client closes the connection.
    if (closing(app)) reply.header("connection", "close");
    await drainBeforeRefusal(request, reply);
  });
  // Clients send Content-Type: application/json on requests without a body (auth-js's logout,
  // postgrest-js's delete): an empty body is no body, not an error. Non-empty bodies keep
  // Fastify's parser, which refuses prototype-poisoning keys.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (body === "" || (typeof body === "string" && body.trim() === "")) return done(null, undefined);
    try {
      checkJsonLimits(body as string);
    } catch (error) {
      return done(error as Error, undefined);
    }
    parseJson(request, body as string, done);
  });
  // Requests counted for GET /metrics, and traced when tracing is on (src/observability/).
  instrumentHttp(app, { metrics: given.metrics, db: deps.db, settings: deps.config.metrics });
  // API calls per tenant and day, for the tenants' invoices (src/billing/api-calls.ts).
  meterApiCalls(app, deps.db);
  app.setErrorHandler(problemErrorHandler);
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, request, {
      status: 404,
      code: "not_found",
      detail: `No route for ${request.method} ${request.url.split("?")[0]}`,
    }),
  );

  // Browser apps (supabase-js in a web page) call every interface from their own origin.
  app.register(cors, {
    origin: true,
    methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    allowedHeaders: [
      "apikey",
      "authorization",
      "content-type",
      "x-client-info",
      "x-supabase-api-version",
      "x-request-id",
      "prefer",
      "range",
      "accept-profile",
      "content-profile",
      "idempotency-key",
      "backline-tenant",
      // A member's public-API calls name their account (docs/public-api.md); conditional writes.
      "backline-account",
      "if-match",
      "if-none-match",
      // Resumable uploads (TUS, /storage/v1/upload/resumable).
      ...TUS_REQUEST_HEADERS,
    ],
    exposedHeaders: [
      "content-range",
      "x-request-id",
      "x-supabase-api-version",
      "retry-after",
      "preference-applied",
      "ratelimit",
      "ratelimit-policy",
      "idempotent-replayed",
      "www-authenticate",
      "etag",
      "location",
      "tus-resumable",
      "upload-offset",
      "upload-length",
      "upload-expires",
    ],
    maxAge: 86400,
  });

  const directory = new TenantDirectory(deps.db);
  const mailer = new Mailer(deps.db, {
    smtpUrl: deps.config.mail.smtpUrl,
    from: deps.config.mail.from,
    logger,
  });
  const auth = new AuthService({
    db: deps.db,
    mailer,
    publicUrl: deps.config.publicUrl,
    oidcAllowPrivate: deps.config.oidcAllowPrivate,
  });
  // Queued mail (a reveal code, a sign-up's confirmation) is sent as soon as its transaction commits.
  app.addHook("onReady", () => mailer.start());
  app.addHook("onClose", () => mailer.close());

  // Rate limits are decided in the process; on PostgreSQL the counts are shared with the other
  // processes in the background (docs/operations.md, "Rate limits across processes").
  const limiter = new MemoryRateLimiter();
  if (deps.db.kind === "postgres" && deps.config.rateLimitSyncMs > 0) {
    let stopSharing: (() => Promise<void>) | undefined;
    app.addHook("onReady", async () => {
      stopSharing = limiter.startSharing(deps.db, deps.config.rateLimitSyncMs, (error) =>
        logger.warn({ err: error }, "rate limits: sharing the counts failed; counting locally"),
      );
    });
    app.addHook("onClose", async () => {
      await stopSharing?.();
    });
  }

  app.register(healthRoutes, { db: deps.db });
  app.register(authRoutes, { prefix: "/auth/v1", auth, directory });

  // Each exposed schema's cache is read on first use, once the database is migrated; a failed
  // read is retried.
  const schemaCaches = new Map<string, Promise<SchemaCache>>();
  const cache = (schema: string) => {
    let loaded = schemaCaches.get(schema);
    if (!loaded) {
      loaded = loadSchemaCache(deps.db, schema).catch((error: unknown) => {
        schemaCaches.delete(schema);
        throw error;
      });
      schemaCaches.set(schema, loaded);
    }
    return loaded;
  };
  // Read again on `NOTIFY pgrst, 'reload schema'` (PostgREST's way; the migration runner sends it
  // after each migration), in every process: requests keep the old cache until the new one is read.
  const reloadSchema = () => {
    for (const schema of [...schemaCaches.keys()]) {
      const next = loadSchemaCache(deps.db, schema);
      next.then(
        () => {
          schemaCaches.set(schema, next);
          // The statements prepared for the old schema's shapes are deallocated (src/db/postgres.ts).
          deps.db.forgetGeneratedStatements();
          logger.info({ schema }, "rest: schema cache reloaded");
        },
        (error: unknown) =>
          logger.warn({ err: error, schema }, "rest: reloading the schema cache failed; keeping the old one"),
      );
    }
  };
  let unlistenSchema: (() => Promise<void>) | undefined;
  app.addHook("onReady", async () => {
    try {
      unlistenSchema = await deps.db.listen(SCHEMA_CHANNEL, reloadSchema);
    } catch (error) {
      logger.warn({ err: error }, "rest: cannot listen for schema reloads");
    }
  });
  app.addHook("onClose", async () => {
    await unlistenSchema?.();
  });
  app.register(restRoutes, {
    prefix: "/rest/v1",
    db: deps.db,
    directory,
    schemaCache: cache,
    schemas: deps.config.restSchemas,
    maxRows: deps.config.restMaxRows,
    planEnabled: deps.config.restPlanEnabled,
    publicUrl: deps.config.publicUrl,
    limiter,
  });
  const secrets = loadSecretBox(deps.config);
  const storage = openStorage(deps.config, secrets);
  app.register(storageRoutes, {
    prefix: "/storage/v1",
    db: deps.db,
    directory,
    store: storage.store,
    signer: storage.signer,
    limits: deps.config.uploads,
    resumableDir: path.join(deps.config.dataDir, "resumable"),
  });
  app.register(publicApiRoutes, {
    prefix: "/api/public/v1",
    db: deps.db,
    directory,
    mailer,
    publicUrl: deps.config.publicUrl,
    secrets,
    webhooks: { allowPrivate: deps.config.webhookAllowPrivate },
    storage: storage.store,
    uploadLimits: deps.config.uploads,
    limiter,
  });
  // The console's and the portal's tenant file (their static files are another plugin's).
  const tenantConfigs = new TenantConfigs({
    db: deps.db,
    publicUrl: deps.config.publicUrl,
    defaultTenant: deps.config.consoleTenant,
  });
  app.register(tenantConfigRoutes, { tenants: tenantConfigs });
  app.register(adminRoutes, {
    prefix: "/admin/v1",
    db: deps.db,
    directory,
    royaltyImportMaxBytes: deps.config.royaltyImportMaxBytes,
    signer: storage.signer,
    publicUrl: deps.config.publicUrl,
    mailer,
  });
  // The Backline Console (docs/console.md): the built web app, with deep links answering index.html.
  // Never at a tenant's own portal domain: the tenant's custom scripts run on that origin, where
  // they could read a console session kept in its localStorage; it is sent to PUBLIC_URL instead.
  const publicHost = new URL(deps.config.publicUrl).hostname.toLowerCase();
  const publicOrigin = new URL(deps.config.publicUrl).origin;
  app.register(async (scope) => {
    scope.addHook("onRequest", async (request, reply) => {
      const host = request.hostname.toLowerCase().replace(/\.$/, "");
      if (host === publicHost) return;
      if ((await tenantConfigs.portal(host, undefined))?.via === "domain")
        return reply.redirect(`${publicOrigin}${request.url}`, 308);
    });
    scope.register(consoleStatic, {
      prefix: "/console",
      mediaOrigins: storageMediaOrigins(deps.config),
    });
  });
  // The portal for labels and artists (docs/portal.md): the same serving, its own build. An
  // uploaded logo is PUBLIC_URL's (/brand/...), which a tenant's own domain is not.
  app.register(portalAccountsRoutes, { db: deps.db, directory });
  app.register(brandAssetRoutes, { db: deps.db });
  app.register(consoleStatic, {
    prefix: "/portal",
    app: "portal",
    mediaOrigins: [...storageMediaOrigins(deps.config), new URL(deps.config.publicUrl).origin],
    // The tenant this address shows, in the start page: what GET /portal/tenant.json answers, or
    // null for no portal here (a slug that cannot be one is left to the app to ask about).
    startData: async (request) => {
      const m = /^\/portal\/t\/([^/?#]+)/.exec(request.url);
      const slug = m?.[1];
      if (slug !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(slug)) return undefined;
      return (await tenantConfigs.portal(request.hostname, slug)) ?? null;
    },
    // The tenant's own scripts, when its admin enabled some (docs/operator.md, "Custom scripts"),
    // and only on the tenant's own domain: PUBLIC_URL's host is one origin for the console and
    // every tenant's /portal/t/<slug>/, whose localStorage holds staff, platform-admin and other
    // tenants' sessions, all readable by any script that runs there.
    pageScripts: async (start, request) => {
      const found = start as { id?: unknown; via?: unknown } | null;
      if (typeof found?.id !== "string" || found.via !== "domain") return undefined;
      const host = request.hostname.toLowerCase().replace(/\.$/, "");
      if (host === publicHost) return undefined;
      return portalScripts(deps.db, found.id, host);
    },
  });
  // The admin API's OpenAPI document, outside its authentication: it describes, it holds no data.
  app.register(adminDocsRoutes, { prefix: "/admin/v1", publicUrl: deps.config.publicUrl });
  // The interactive API references' assets, and /rest/v1's reference page (src/http/reference-page.ts).
  app.register(referenceRoutes, { publicUrl: deps.config.publicUrl });
  return app;
}
