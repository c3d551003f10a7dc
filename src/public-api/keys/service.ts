import { createHash, randomInt } from "node:crypto";
import type { Db } from "../../db/db.ts";
import type { Tx } from "../../db/types.ts";
import type { Mailer } from "../../mail/mailer.ts";
import { ApiError } from "../errors.ts";
import { generateApiKey, type KeyMode } from "./format.ts";

/**
 * The API-key lifecycle's server side (docs/public-api.md, "API keys"). Who may manage which key
 * is decided by row-level security on internal.api_keys (the routes read the key as the caller
 * first); these steps then run on the service path because they touch what no client may read:
 * the reveal code and the key hash.
 */
export const KEY_COLUMNS = [
  "id",
  "account_id",
  "name",
  "mode",
  "prefix",
  "scopes",
  "status",
  "expires_at",
  "last_used_at",
  "revealed_at",
  "frozen_at",
  "revoked_at",
  "created_at",
] as const;

export const DEFAULT_SCOPES = ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage"];

const CODE_MINUTES = 15;
const MAX_ATTEMPTS = 5;

function notPending(status: string): ApiError {
  return status === "revoked"
    ? new ApiError(409, "api_key_revoked", "This key was revoked; create a new one.")
    : new ApiError(
        409,
        "api_key_already_revealed",
        "This key was revealed already; its secret cannot be shown again.",
      );
}

const codeHash = (keyId: string, code: string) =>
  createHash("sha256").update(`${keyId}:${code}`).digest("hex");

function mask(email: string): string {
  const [local = "", domain = ""] = email.split("@");
  return `${local.slice(0, 1)}${"*".repeat(Math.max(1, Math.min(local.length - 1, 6)))}@${domain}`;
}

/** E-mails a new six-digit reveal code to the owners of the key's account; older codes stop working. */
export async function sendRevealCode(
  db: Db,
  mailer: Mailer,
  keyId: string,
): Promise<{ sent_to: string[]; expires_at: string }> {
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  return db.asService(async (tx) => {
    const key = (
      await tx.query<{ tenant_id: string; account_id: string; name: string; prefix: string; status: string }>(
        "select tenant_id, account_id, name, prefix, status from internal.api_keys where id = $1 for update",
        [keyId],
      )
    ).rows[0];
    if (!key) throw new ApiError(404, "resource_missing", `No API key with id ${keyId}.`);
    if (key.status !== "pending_reveal") throw notPending(key.status);
    const owners = (
      await tx.query<{ email: string }>(
        `select u.email from internal.memberships m join internal.users u on u.id = m.user_id
         where m.account_id = $1 and m.role = 'owner' and u.email is not null and u.deleted_at is null
         order by u.email`,
        [key.account_id],
      )
    ).rows;
    if (owners.length === 0) {
      throw new ApiError(
        409,
        "no_account_owner",
        "The account has no owner with an e-mail address to verify the key; ask the operator to issue it.",
      );
    }
    const r = await tx.query<{ expires_at: Date }>(
      `update internal.api_keys set reveal_code_hash = $2, reveal_attempts = 0,
         reveal_code_expires_at = now() + make_interval(mins => $3)
       where id = $1 returning reveal_code_expires_at as expires_at`,
      [keyId, codeHash(keyId, code), CODE_MINUTES],
    );
    for (const owner of owners) {
      await mailer.enqueue(tx, {
        tenantId: key.tenant_id,
        to: owner.email,
        kind: "api_key.reveal",
        secretTtlSeconds: CODE_MINUTES * 60,
        subject: "Your API key verification code",
        text: [
          `Someone asked to reveal the API key "${key.name || key.prefix}" (${key.prefix}...) of your account.`,
          "",
          `Verification code: ${code}`,
          "",
          `The code works once, for ${CODE_MINUTES} minutes. If you did not ask for this, freeze or revoke the key.`,
        ].join("\n"),
      });
    }
    return {
      sent_to: owners.map((o) => mask(o.email)),
      expires_at: (r.rows[0]?.expires_at ?? new Date()).toISOString(),
    };
  });
}

/** Checks the code and, if it holds, makes the key's secret: returned here once, stored only as a hash. */
export async function revealKey(
  db: Db,
  keyId: string,
  code: string,
): Promise<{ row: Record<string, unknown>; secret: string }> {
  const outcome = await db.asService(async (tx) => {
    const key = (
      await tx.query<{
        mode: KeyMode;
        status: string;
        reveal_code_hash: string | null;
        code_expired: boolean;
        reveal_attempts: number;
      }>(
        `select mode, status, reveal_code_hash, coalesce(reveal_code_expires_at <= now(), true) as code_expired,
                reveal_attempts
         from internal.api_keys where id = $1 for update`,
        [keyId],
      )
    ).rows[0];
    if (!key) return { kind: "missing" as const };
    if (key.status !== "pending_reveal") return { kind: "revealed" as const, status: key.status };
    if (!key.reveal_code_hash || key.reveal_attempts >= MAX_ATTEMPTS) return { kind: "locked" as const };
    if (key.code_expired) return { kind: "expired" as const };
    if (codeHash(keyId, code) !== key.reveal_code_hash) {
      // Counted in this transaction, which commits: guesses are limited.
      await tx.query("update internal.api_keys set reveal_attempts = reveal_attempts + 1 where id = $1", [
        keyId,
      ]);
      return { kind: "wrong" as const };
    }
    const made = generateApiKey(key.mode);
    const row = (
      await tx.query<Record<string, unknown>>(
        `update internal.api_keys set key_hash = $2, prefix = $3, status = 'active', revealed_at = now(),
           reveal_code_hash = null, reveal_code_expires_at = null
         where id = $1 returning ${KEY_COLUMNS.join(", ")}`,
        [keyId, made.hash, made.prefix],
      )
    ).rows[0] as Record<string, unknown>;
    return { kind: "ok" as const, row, secret: made.key };
  });
  switch (outcome.kind) {
    case "ok":
      return { row: outcome.row, secret: outcome.secret };
    case "missing":
      throw new ApiError(404, "resource_missing", `No API key with id ${keyId}.`);
    case "revealed":
      throw notPending(outcome.status);
    case "locked":
      throw new ApiError(
        409,
        "verification_code_required",
        "No valid code is pending for this key: ask for a new one with POST /api-keys/{id}/verification.",
      );
    case "expired":
      throw new ApiError(422, "verification_code_expired", "The code has expired; ask for a new one.", {
        param: "code",
      });
    case "wrong":
      throw new ApiError(422, "verification_code_invalid", "The code is not the one sent for this key.", {
        param: "code",
      });
  }
}

/** The sandbox twin of a live account (created on first use): where test-mode keys act. */
export async function sandboxAccount(tx: Tx, accountId: string): Promise<string> {
  const account = (
    await tx.query<{ id: string; tenant_id: string; name: string; kind: string; is_sandbox: boolean }>(
      "select id, tenant_id, name, kind, is_sandbox from internal.accounts where id = $1",
      [accountId],
    )
  ).rows[0];
  if (!account) throw new Error(`no account ${accountId}`);
  if (account.is_sandbox) return account.id;
  const existing = await tx.query<{ id: string }>("select id from internal.accounts where sandbox_of = $1", [
    accountId,
  ]);
  if (existing.rows[0]) return existing.rows[0].id;
  const created = await tx.query<{ id: string }>(
    `insert into internal.accounts (tenant_id, name, kind, is_sandbox, sandbox_of)
     values ($1, $2, $3, true, $4) returning id`,
    [account.tenant_id, `${account.name.slice(0, 190)} (sandbox)`, account.kind, account.id],
  );
  return created.rows[0]?.id as string;
}

/** The operator's path (`backline keys issue`): an active key at once, its secret returned once. */
export async function issueKey(
  db: Db,
  input: { accountId: string; mode: KeyMode; name?: string; scopes?: string[]; expiresAt?: Date },
): Promise<{ row: Record<string, unknown>; secret: string }> {
  return db.asService(async (tx) => {
    const accountId = input.mode === "test" ? await sandboxAccount(tx, input.accountId) : input.accountId;
    const sandbox = (
      await tx.query<{ is_sandbox: boolean }>("select is_sandbox from internal.accounts where id = $1", [
        accountId,
      ])
    ).rows[0];
    if (!sandbox) throw new Error(`no account ${accountId}`);
    if (input.mode === "live" && sandbox.is_sandbox)
      throw new Error("a live key cannot be issued for a sandbox account");
    const made = generateApiKey(input.mode);
    const row = (
      await tx.query<Record<string, unknown>>(
        `insert into internal.api_keys (account_id, name, scopes, expires_at, key_hash, prefix, status, revealed_at)
         values ($1, $2, $3, $4, $5, $6, 'active', now()) returning ${KEY_COLUMNS.join(", ")}`,
        [
          accountId,
          input.name ?? "",
          input.scopes ?? DEFAULT_SCOPES,
          input.expiresAt ?? null,
          made.hash,
          made.prefix,
        ],
      )
    ).rows[0] as Record<string, unknown>;
    return { row, secret: made.key };
  });
}
