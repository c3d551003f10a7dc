import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { noteTenant } from "../billing/api-calls.ts";
import { CatalogueCache } from "../catalog/catalogue.ts";
import { setRequestActor } from "../db/audit-context.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { bearerOf } from "../http/gateway.ts";
import { type Limit, MemoryRateLimiter } from "../http/rate-limit.ts";
import { sendReferencePage } from "../http/reference-page.ts";
import type { Mailer } from "../mail/mailer.ts";
import type { ObjectStore } from "../storage/driver.ts";
import type { UploadLimits } from "../storage/uploads.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { WEBHOOK_EVENTS } from "../webhooks/events.ts";
import type { SecretBox } from "../webhooks/secrets.ts";
import { ACCOUNT_HEADER, Authenticator, type Caller, namedAccount, type Scope } from "./auth.ts";
import { deprecationHeaders } from "./deprecation.ts";
import { ApiError, renderError } from "./errors.ts";
import { claimIdempotencyKey, requestHash, type StoredResponse } from "./idempotency.ts";
import { openApiDocument } from "./openapi.ts";
import { addOnRoutes } from "./resources/add-ons.ts";
import { keyRoutes } from "./resources/api-keys.ts";
import { artistRoutes } from "./resources/artists.ts";
import { catalogueExportRoutes } from "./resources/catalogue-export.ts";
import { meRoutes } from "./resources/me.ts";
import { moneyRoutes } from "./resources/money.ts";
import { releaseRoutes } from "./resources/releases.ts";
import { royaltyRoutes } from "./resources/royalties.ts";
import { ruleRoutes } from "./resources/rules.ts";
import { ticketRoutes } from "./resources/tickets.ts";
import { trackRoutes } from "./resources/tracks.ts";
import { transferRoutes, transferUploadReceiver } from "./resources/transfers.ts";
import { uploadRoutes } from "./resources/uploads.ts";
import { webhookRoutes } from "./resources/webhooks.ts";
import { type AnyRoute, parseBody, parseParams, parseQuery, type Services } from "./route.ts";

/**
 * /api/public/v1 (seed 001; docs/public-api.md). Each request: the caller is identified (API key,
 * or a user's token where a route allows it), rate-limited per key, checked for the route's
 * scope, validated against the route's schemas, and run in one transaction as the caller.
 */
export interface PublicApiOptions {
  db: Db;
  directory: TenantDirectory;
  mailer: Mailer;
  publicUrl: string;
  secrets: SecretBox;
  webhooks: { allowPrivate: boolean };
  storage: ObjectStore;
  uploadLimits: UploadLimits;
  /** The app's rate limiter (shared with the other processes on PostgreSQL); its own when unset. */
  limiter?: MemoryRateLimiter;
}

export const PUBLIC_API_VERSION = "1.2.0";

export const ROUTES: readonly AnyRoute[] = [
  ...releaseRoutes,
  ...trackRoutes,
  ...artistRoutes,
  ...ruleRoutes,
  ...keyRoutes,
  ...webhookRoutes,
  ...uploadRoutes,
  ...royaltyRoutes,
  ...moneyRoutes,
  ...transferRoutes,
  ...catalogueExportRoutes,
  ...meRoutes,
  ...ticketRoutes,
  ...addOnRoutes,
];

/** Per API key (or user), unless the tenant's settings.public_api_rate_limit says otherwise. */
export const DEFAULT_RATE_LIMIT: Limit = { max: 100, windowSeconds: 10 };

/** Per client address: calls whose credentials identify nobody (401), before the next is refused unlooked. */
export const FAILED_AUTH_LIMIT: Limit = { max: 30, windowSeconds: 60 };

declare module "fastify" {
  interface FastifyRequest {
    publicApiCaller?: Caller;
  }
}

function fastifyPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ":$1");
}

export async function publicApiRoutes(app: FastifyInstance, options: PublicApiOptions): Promise<void> {
  const { db, directory } = options;
  const catalogue = new CatalogueCache(db);
  const authenticator = new Authenticator(db, directory, (error) =>
    app.log.warn({ err: error }, "last_used_at"),
  );
  const limiter = options.limiter ?? new MemoryRateLimiter();
  const services: Services = {
    db,
    mailer: options.mailer,
    publicUrl: options.publicUrl,
    catalogue,
    secrets: options.secrets,
    webhooks: options.webhooks,
    storage: options.storage,
    uploadLimits: options.uploadLimits,
  };
  // The document and its HTML page (3 MB) are made by their first request, not held from start.
  let openapi: ReturnType<typeof openApiDocument> | undefined;
  const document = () =>
    (openapi ??= openApiDocument(
      ROUTES,
      `${options.publicUrl}/api/public/v1`,
      PUBLIC_API_VERSION,
      WEBHOOK_EVENTS,
    ));

  const send = (reply: FastifyReply, r: StoredResponse) => {
    for (const [k, v] of Object.entries(r.headers)) reply.header(k, v);
    if (r.status === 204 || r.body === undefined) return reply.status(r.status).send();
    // A file the route answers (a statement's PDF or CSV) carries its own content-type.
    const own = r.status < 400 ? r.headers["content-type"] : undefined;
    const type = r.status >= 400 ? "application/problem+json" : (own ?? "application/json");
    return reply.status(r.status).type(type).send(r.body);
  };

  // Only JSON bodies here: a text/plain body is 415, not a string handed to the handlers.
  app.removeContentTypeParser("text/plain");
  app.setErrorHandler((error, request, reply) => {
    const r = renderError(error, request);
    return send(reply, { status: r.status, body: r.body, headers: r.headers });
  });
  app.setNotFoundHandler((request, reply) => {
    const r = renderError(
      new ApiError(404, "route_not_found", `No endpoint ${request.method} ${request.url.split("?")[0]}.`),
      request,
    );
    return send(reply, { status: r.status, body: r.body, headers: r.headers });
  });

  // A transfer file's upload URL (resources/transfers.ts): the token is the permission, the body raw.
  app.register(transferUploadReceiver, { db, store: options.storage });

  app.get("/openapi.json", async (_request, reply) => reply.type("application/json").send(document()));
  // The interactive reference over that document (src/http/reference-page.ts).
  app.get("/docs", async (_request, reply) =>
    sendReferencePage(reply, options.publicUrl, {
      title: "Backline public API reference",
      document: "openapi.json",
    }),
  );

  // A caller's limit is decided before any database work (docs/public-api.md, "Rate limits"): the
  // first call of a token looks the key up and learns its limit; from then on the token's hash
  // finds it here, so a caller over its limit costs one hash and a map lookup. Addresses that keep
  // sending tokens that identify nobody are refused before their next lookup.
  // A key's caller is kept with it: its next requests check the key again in their own
  // transaction's first statement (Authenticator.verifyInTransaction), not in one of its own.
  const learned = new Map<string, { who: string; limit: Limit; caller: Caller | undefined }>();

  const refuse = (retryAfter: number, message: string) =>
    new ApiError(429, "rate_limited", message, { headers: { "Retry-After": String(retryAfter) } });

  function count(who: string, limit: Limit, reply: FastifyReply): void {
    const r = limiter.hit(who, limit);
    // draft-ietf-httpapi-ratelimit-headers: the policy, and what is left of it.
    reply.header("RateLimit-Policy", `"default";q=${limit.max};w=${limit.windowSeconds}`);
    reply.header("RateLimit", `"default";r=${r.remaining};t=${r.retryAfter}`);
    if (!r.allowed) {
      throw refuse(
        r.retryAfter,
        `Too many requests: ${limit.max} per ${limit.windowSeconds} s per key. Retry after ${r.retryAfter} s.`,
      );
    }
  }

  async function limitOf(caller: Caller): Promise<{ who: string; limit: Limit }> {
    const tenant = await directory.get(caller.tenantId);
    const custom = tenant?.settings.public_api_rate_limit as Partial<Limit> | undefined;
    return {
      who: caller.keyId ? `key:${caller.keyId}` : `user:${caller.userId}`,
      limit: {
        max: Number(custom?.max ?? DEFAULT_RATE_LIMIT.max),
        windowSeconds: Number(custom?.windowSeconds ?? DEFAULT_RATE_LIMIT.windowSeconds),
      },
    };
  }

  /**
   * Backline-Account: a member must name the account they act for on every route but key
   * management; a key may name only its own account.
   */
  function actingAccount(request: FastifyRequest, caller: Caller, scope: Scope): void {
    const named = request.headers[ACCOUNT_HEADER];
    if (caller.kind === "api_key") {
      if (named !== undefined && namedAccount(named) !== caller.accountId) {
        throw new ApiError(
          403,
          "account_not_accessible",
          "An API key acts for its own account only: leave Backline-Account out, or name the key's account.",
          { param: "Backline-Account" },
        );
      }
      return;
    }
    if (caller.accountId === undefined && scope !== "keys:manage") {
      throw new ApiError(
        400,
        "account_required",
        "Name the account to act for: send its id in the Backline-Account header with your access token.",
        {
          param: "Backline-Account",
          errors: [{ param: "Backline-Account", code: "required", message: "the account to act for" }],
        },
      );
    }
  }

  /** The actor of the request's audit rows (acts on the service path name it; migration 0020). */
  function actAs(request: FastifyRequest, caller: Caller): void {
    // Counted for the tenant's invoice once answered below 400 (src/billing/api-calls.ts).
    noteTenant(request, caller.tenantId);
    setRequestActor(
      request,
      caller.kind === "api_key"
        ? { type: "api_key", id: caller.keyId ?? "", detail: { account_id: caller.accountId } }
        : { type: "user", id: caller.userId ?? "" },
    );
  }

  /**
   * Identifies the caller and counts the call, refusing one over a limit before the database where
   * it can. `fresh` is false for a key known from an earlier request: not looked up now, it is
   * checked in the request's transaction instead.
   */
  async function admit(
    request: FastifyRequest,
    reply: FastifyReply,
    allowUser: boolean,
  ): Promise<{ caller: Caller; fresh: boolean; token: string | undefined }> {
    const token = bearerOf(request);
    const hash = token ? createHash("sha256").update(token).digest("hex") : undefined;
    const known = hash ? learned.get(hash) : undefined;
    const failures = `auth-failures:${request.ip}`;
    if (known) {
      count(known.who, known.limit, reply);
      if (known.caller) {
        // Known from an earlier request, and audited as itself all the same.
        actAs(request, known.caller);
        return { caller: known.caller, fresh: false, token: hash };
      }
    } else {
      const r = limiter.peek(failures, FAILED_AUTH_LIMIT);
      if (!r.allowed) {
        throw refuse(
          r.retryAfter,
          `Too many requests with unknown or invalid credentials from this address. Retry after ${r.retryAfter} s.`,
        );
      }
    }
    let caller: Caller;
    try {
      caller = await authenticator.identify(request, allowUser);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) limiter.hit(failures, FAILED_AUTH_LIMIT);
      throw error;
    }
    actAs(request, caller);
    if (hash && !known) {
      const decided = await limitOf(caller);
      if (learned.size >= 100_000) learned.clear();
      learned.set(hash, { ...decided, caller: caller.kind === "api_key" ? caller : undefined });
      count(decided.who, decided.limit, reply);
    }
    return { caller, fresh: true, token: hash };
  }

  for (const spec of ROUTES) {
    const sunsetting = spec.deprecated ? deprecationHeaders(spec.deprecated) : undefined;
    app.route({
      method: spec.method,
      url: fastifyPath(spec.path),
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        if (sunsetting) reply.headers(sunsetting);
        const { caller, fresh, token } = await admit(request, reply, spec.allowUser !== false);
        request.publicApiCaller = caller;
        // A key known from earlier requests is checked again (active, unexpired, its scope) in the
        // first statement of each transaction the handler opens; `verified` says one did.
        let verified = fresh;
        const keyHash = caller.kind === "api_key" ? caller.keyHash : undefined;
        // With an Idempotency-Key, each write transaction marks the key applied in its own commit.
        let markApplied: ((tx: Tx) => Promise<void>) | undefined;
        const transaction = <T>(work: (tx: Tx) => Promise<T>, readOnly: boolean): Promise<T> => {
          const mark = readOnly ? undefined : markApplied;
          const fn = mark
            ? async (tx: Tx) => {
                const out = await work(tx);
                await mark(tx);
                return out;
              }
            : work;
          if (!keyHash) return db.withRequestContext(caller.claims, fn, { readOnly });
          return db.withResolvedContext(
            "authenticated",
            async (tx) => {
              const key = await authenticator.verifyInTransaction(tx, keyHash).catch((error: unknown) => {
                // Frozen, revoked or expired since: the next request looks the key up afresh.
                if (token) learned.delete(token);
                throw error;
              });
              if (!key.scopes.includes(spec.scope)) {
                if (token) learned.delete(token);
                throw new ApiError(403, "insufficient_scope", `This API key lacks the ${spec.scope} scope.`);
              }
              verified = true;
              return "authenticated";
            },
            fn,
            { readOnly },
          );
        };
        /** For a handler that opened no transaction (or a replayed answer): the key's own lookup, as before. */
        const verifyAlone = async (): Promise<StoredResponse | undefined> => {
          if (verified) return undefined;
          try {
            await authenticator.identify(request, spec.allowUser !== false);
            verified = true;
            return undefined;
          } catch (error) {
            const r = renderError(error, request);
            return { status: r.status, body: r.body, headers: r.headers };
          }
        };
        if (spec.person) {
          // A person's own money (the /me routes): their token, for no account, whatever their roles.
          if (caller.kind !== "user") {
            throw new ApiError(
              403,
              "person_required",
              "This endpoint acts for a signed-in person: use their access token from /auth/v1, not an API key.",
            );
          }
        } else actingAccount(request, caller, spec.scope);
        if (!spec.person && !caller.scopes.includes(spec.scope)) {
          const lacking = caller.memberRole
            ? `Your role in this account (${caller.memberRole}) does not give the ${spec.scope} scope.`
            : `This API key lacks the ${spec.scope} scope.`;
          throw new ApiError(403, "insufficient_scope", lacking, {
            headers: {
              "WWW-Authenticate": `Bearer realm="backline", error="insufficient_scope", scope="${spec.scope}"`,
            },
          });
        }
        const params = parseParams(spec.params, request.params);
        const query = parseQuery(spec.query, request.query);
        const body = parseBody(
          spec.body,
          spec.check,
          spec.check ? await catalogue.get() : undefined,
          request.body,
          spec.bodyOptional,
        );

        const run = async (): Promise<StoredResponse> => {
          try {
            const out = await spec.handler({
              caller,
              params,
              query,
              body,
              request,
              reply,
              services,
              read: <T>(fn: (tx: Tx) => Promise<T>) => transaction(fn, true),
              write: <T>(fn: (tx: Tx) => Promise<T>) => transaction(fn, false),
            });
            return (
              (await verifyAlone()) ?? {
                status: out.status ?? 200,
                body: out.body,
                headers: out.headers ?? {},
              }
            );
          } catch (error) {
            const r = renderError(error, request);
            // A busy database (503) says nothing about the key and must not wait for it a second time.
            if (r.status === 503) return { status: r.status, body: r.body, headers: r.headers };
            return (await verifyAlone()) ?? { status: r.status, body: r.body, headers: r.headers };
          }
        };

        const key = request.headers["idempotency-key"];
        if (spec.method !== "POST" || spec.idempotent === false || key === undefined)
          return send(reply, await run());
        const claimed = await claimIdempotencyKey(db, {
          owner: caller.accountId ? `account:${caller.accountId}` : `user:${caller.userId}`,
          method: spec.method,
          path: request.url.split("?")[0] ?? "",
          key: Array.isArray(key) ? (key[0] ?? "") : key,
          // An answer with a secret is bound to who asked: another key of the account reusing the
          // Idempotency-Key gets 422, never the secret.
          hash: requestHash(
            spec.method,
            request.url,
            request.body,
            spec.secretInResponse ? (caller.keyId ?? caller.userId) : undefined,
          ),
          ...(spec.secretInResponse ? { seal: options.secrets } : {}),
        });
        if (claimed.kind === "replay") {
          const refused = await verifyAlone();
          if (refused) return send(reply, refused);
          return send(reply, {
            ...claimed.response,
            headers: { ...claimed.response.headers, "Idempotent-Replayed": "true" },
          });
        }
        markApplied = claimed.applied;
        const response = await run();
        await claimed.finish(response);
        return send(reply, response);
      },
    });
  }
}
