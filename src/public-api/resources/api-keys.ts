import { z } from "zod";
import { Timestamp, TimestampInput } from "../../http/formats.ts";
import { SCOPES } from "../auth.ts";
import { ApiError, notFound } from "../errors.ts";
import {
  DEFAULT_SCOPES,
  KEY_COLUMNS,
  newKeyScopes,
  REVEAL_CODE_LIMITS,
  REVEAL_LIMITS,
  revealKey,
  sendRevealCode,
} from "../keys/service.ts";
import { type Context, Id, listOf, Pagination, page, route } from "../route.ts";
import { columns, countAndPage, insertRow, updateRow } from "./sql.ts";

/**
 * API-key management (docs/public-api.md, "API keys"): by an owner or admin of the account with
 * their access token from /auth/v1, or by a key with the keys:manage scope. Row-level security on
 * internal.api_keys decides which keys a caller reaches; another account's key is not found.
 */

const withId = z.object({ id: Id }).strict();

const ApiKey = z
  .object({
    id: Id,
    object: z.literal("api_key"),
    account_id: Id,
    name: z.string(),
    mode: z.enum(["live", "test"]),
    prefix: z.string().meta({ description: "The visible start of the key, e.g. bk_live_4fT9aB." }),
    scopes: z.array(z.enum(SCOPES)),
    status: z.enum(["pending_reveal", "active", "frozen", "revoked"]).meta({
      description: "pending_reveal until the owner's code reveals it; then active, frozen or revoked.",
    }),
    expires_at: Timestamp.nullable(),
    last_used_at: Timestamp.nullable().meta({ description: "Updated at most once a minute." }),
    revealed_at: Timestamp.nullable(),
    reveal_locked_at: Timestamp.nullable().meta({
      description: "When too many wrong codes locked the key's reveal: it can then only be revoked.",
    }),
    frozen_at: Timestamp.nullable(),
    revoked_at: Timestamp.nullable(),
    created_at: Timestamp,
  })
  .meta({ id: "ApiKey" });

const Verification = z
  .object({
    sent_to: z.array(z.string()).meta({ description: "The account owners' addresses, masked." }),
    expires_at: Timestamp,
  })
  .meta({ id: "KeyVerification" });

const ApiKeyCreated = ApiKey.extend({ verification: Verification }).meta({ id: "ApiKeyCreated" });
const ApiKeyRevealed = ApiKey.extend({
  secret: z.string().meta({ description: "The key itself. Shown once: store it now." }),
}).meta({ id: "ApiKeyRevealed" });

const KeyCreate = z
  .object({
    name: z.string().trim().max(200).default(""),
    scopes: z
      .array(z.enum(SCOPES))
      .min(1)
      .optional()
      .meta({
        description:
          `Default: ${DEFAULT_SCOPES.join(", ")} (for a key made by a key: those of them it has, or else all of its own). ` +
          "A key never gives a new key a scope it lacks itself: 403 insufficient_scope.",
      }),
    expires_at: TimestampInput.refine((v) => Date.parse(v) > Date.now(), "must be in the future").optional(),
    account_id: Id.optional().meta({
      description: "The account, for a user managing several; a key manages its own account.",
    }),
  })
  .strict()
  .meta({ id: "ApiKeyCreate" });

const RevealBody = z
  .object({
    code: z
      .string()
      .regex(/^[0-9]{6}$/)
      .meta({ description: "The six-digit code e-mailed to the owners." }),
  })
  .strict()
  .meta({ id: "ApiKeyReveal" });

const ListQuery = Pagination.extend({ account_id: Id.optional() }).strict();

const keyOut = (row: Record<string, unknown>) => ({ id: row.id, object: "api_key", ...row });

type Ctx = Context<{ id: string }, unknown, unknown>;

/** The key as the caller sees it (row-level security), or 404. */
async function visibleKey(ctx: Ctx): Promise<Record<string, unknown>> {
  const row = await ctx.read(
    async (tx) =>
      (
        await tx.query<Record<string, unknown>>(
          `select ${columns(KEY_COLUMNS)} from internal.api_keys where id = $1`,
          [ctx.params.id],
        )
      ).rows[0],
  );
  if (!row) throw notFound("API key", ctx.params.id);
  return row;
}

function setStatus(status: "active" | "frozen" | "revoked") {
  return async (ctx: Ctx) => {
    const row = await ctx.write(async (tx) => {
      try {
        return await updateRow<Record<string, unknown>>(
          tx,
          "internal.api_keys",
          ctx.params.id,
          { status },
          KEY_COLUMNS,
        );
      } catch (error) {
        if ((error as { code?: string }).code === "BL002") {
          throw new ApiError(409, "invalid_status_transition", (error as Error).message);
        }
        throw error;
      }
    });
    if (!row) throw notFound("API key", ctx.params.id);
    return { body: keyOut(row) };
  };
}

const common = { tag: "API keys", scope: "keys:manage" } as const;

export const keyRoutes = [
  route({
    ...common,
    method: "GET",
    path: "/api-keys",
    operationId: "listApiKeys",
    summary: "List API keys",
    description:
      "The keys of the accounts the caller manages (a key: its own account), newest first. Secrets are never shown.",
    query: ListQuery,
    response: { status: 200, description: "A page of keys.", schema: listOf(ApiKey, "ApiKeyList") },
    handler: async ({ query, read }) => {
      const listed = await read((tx) =>
        countAndPage<Record<string, unknown>>(
          tx,
          {
            from: "internal.api_keys",
            where: "($1::uuid is null or account_id = $1::uuid)",
            order: "created_at desc, id",
            columns: columns(KEY_COLUMNS),
          },
          [query.account_id ?? null],
          query,
        ),
      );
      return { body: page(listed.rows.map(keyOut), query, listed) };
    },
  }),

  route({
    ...common,
    method: "POST",
    path: "/api-keys",
    operationId: "createApiKey",
    summary: "Create an API key (revealed after e-mail verification)",
    description:
      "Creates a live key in pending_reveal and e-mails a six-digit code to the account's owners. " +
      "POST /api-keys/{id}/reveal with the code shows the secret, once. Test-mode keys are issued by the operator. " +
      "When the account's owners were already sent the most codes an hour allows, no key is made (429 verification_codes_exceeded).",
    body: KeyCreate,
    response: { status: 201, description: "The key, waiting to be revealed.", schema: ApiKeyCreated },
    errors: [404, 409, 413, 415, 422],
    handler: async ({ caller, body, write, services }) => {
      // The scopes are settled here, once, and the insert uses them; the database refuses a key
      // more than its maker holds (migration 0013), answered 403 insufficient_scope.
      const scopes = newKeyScopes(caller, body.scopes);
      const row = await write(async (tx) => {
        const ids = (
          await tx.query<{ all: string[]; live: string[] }>(
            "select auth.manageable_account_ids() as all, auth.manageable_live_account_ids() as live",
          )
        ).rows[0];
        const manageable = ids?.all ?? [];
        const live = ids?.live ?? [];
        const accountId = body.account_id ?? caller.accountId ?? (live.length === 1 ? live[0] : undefined);
        if (!accountId) {
          throw new ApiError(422, "validation_failed", "Name the account: you manage several (or none).", {
            errors: [{ param: "account_id", code: "required", message: "account_id is required" }],
          });
        }
        if (!manageable.includes(accountId)) {
          throw new ApiError(404, "resource_missing", `No account ${accountId} that you manage.`, {
            param: "account_id",
          });
        }
        return insertRow<Record<string, unknown>>(
          tx,
          "internal.api_keys",
          {
            account_id: accountId,
            name: body.name,
            scopes,
            expires_at: body.expires_at,
          },
          KEY_COLUMNS,
        );
      });
      try {
        const verification = await sendRevealCode(services.db, services.mailer, String(row.id));
        return { status: 201, body: { ...keyOut(row), verification } };
      } catch (error) {
        // No code could be sent (no owner to send it to): the key would stay pending for ever.
        await services.db.asService((tx) =>
          tx.query("delete from internal.api_keys where id = $1", [row.id]),
        );
        throw error;
      }
    },
  }),

  route({
    ...common,
    method: "GET",
    path: "/api-keys/{id}",
    operationId: "getApiKey",
    summary: "Get an API key",
    params: withId,
    response: { status: 200, description: "The key (never its secret).", schema: ApiKey },
    errors: [404],
    handler: async (ctx) => ({ body: keyOut(await visibleKey(ctx)) }),
  }),

  route({
    ...common,
    method: "POST",
    path: "/api-keys/{id}/verification",
    operationId: "resendApiKeyVerification",
    summary: "Send a new reveal code",
    description:
      "E-mails a new code to the account's owners; earlier codes stop working. A new code gives no new tries " +
      "against the key's and the account's limits (see the reveal); a locked key gets none (409 api_key_reveal_locked). " +
      `At most ${REVEAL_CODE_LIMITS.PER_KEY.max} codes an hour per key and ${REVEAL_CODE_LIMITS.PER_ACCOUNT.max} per account are mailed ` +
      "(429 verification_codes_exceeded, with Retry-After).",
    params: withId,
    response: { status: 201, description: "Where the code went.", schema: Verification },
    errors: [404, 409],
    handler: async (ctx) => {
      await visibleKey(ctx);
      return { status: 201, body: await sendRevealCode(ctx.services.db, ctx.services.mailer, ctx.params.id) };
    },
  }),

  route({
    ...common,
    method: "POST",
    path: "/api-keys/{id}/reveal",
    operationId: "revealApiKey",
    summary: "Reveal a key's secret, once",
    description:
      "With the e-mailed code: activates the key and returns its secret. The secret is not stored and cannot " +
      "be shown again (so Idempotency-Key is ignored here: a kept response would store it). Wrong codes are " +
      `limited: ${REVEAL_LIMITS.CODE_ATTEMPTS} use a code up; ${REVEAL_LIMITS.KEY_FAILURES} in all lock the key for good ` +
      `(409 api_key_reveal_locked), whatever new codes were asked for; ${REVEAL_LIMITS.ACCOUNT_FAILURES} over the ` +
      `account's keys in ${REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS} hours pause every reveal of the account ` +
      "(429 reveal_attempts_exceeded, with Retry-After). The account's owners are e-mailed when a limit is reached.",
    params: withId,
    idempotent: false,
    body: RevealBody,
    response: { status: 200, description: "The active key and its secret.", schema: ApiKeyRevealed },
    errors: [404, 409, 413, 415, 422],
    handler: async (ctx) => {
      await visibleKey(ctx);
      const { row, secret } = await revealKey(
        ctx.services.db,
        ctx.services.mailer,
        ctx.params.id,
        (ctx.body as { code: string }).code,
      );
      return { body: { ...keyOut(row), secret } };
    },
  }),

  route({
    ...common,
    method: "POST",
    path: "/api-keys/{id}/freeze",
    operationId: "freezeApiKey",
    summary: "Freeze a key",
    description:
      "Takes effect at once: requests with the key answer 401 api_key_frozen until it is unfrozen.",
    params: withId,
    response: { status: 200, description: "The frozen key.", schema: ApiKey },
    errors: [404, 409],
    handler: setStatus("frozen"),
  }),

  route({
    ...common,
    method: "POST",
    path: "/api-keys/{id}/unfreeze",
    operationId: "unfreezeApiKey",
    summary: "Unfreeze a key",
    params: withId,
    response: { status: 200, description: "The active key.", schema: ApiKey },
    errors: [404, 409],
    handler: setStatus("active"),
  }),

  route({
    ...common,
    method: "DELETE",
    path: "/api-keys/{id}",
    operationId: "revokeApiKey",
    summary: "Revoke a key for good",
    params: withId,
    // Revoking is allowed from any status and again after (a no-op): no 409.
    response: { status: 200, description: "The revoked key.", schema: ApiKey },
    errors: [404],
    handler: setStatus("revoked"),
  }),
];
