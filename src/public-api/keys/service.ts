import { createHash, randomInt } from "node:crypto";
import type { Db } from "../../db/db.ts";
import type { Tx } from "../../db/types.ts";
import { consumeIn } from "../../http/rate-limit.ts";
import type { Mailer } from "../../mail/mailer.ts";
import type { Caller, Scope } from "../auth.ts";
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
  "reveal_locked_at",
  "frozen_at",
  "revoked_at",
  "created_at",
] as const;

export const DEFAULT_SCOPES = ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage"];

/**
 * The scopes a new key is created with: those asked for, else the defaults — for a key made by a
 * key, the defaults it has itself (or, having none of them, its own scopes). The one place they
 * are decided; the database then refuses any scope the making key lacks (migration 0013).
 */
export function newKeyScopes(
  caller: Pick<Caller, "kind" | "scopes">,
  requested: readonly string[] | undefined,
) {
  if (requested) return [...requested];
  if (caller.kind !== "api_key") return [...DEFAULT_SCOPES];
  const own = DEFAULT_SCOPES.filter((scope) => caller.scopes.includes(scope as Scope));
  return own.length > 0 ? own : [...caller.scopes];
}

/** A code works for this long. */
export const CODE_MINUTES = 15;
/**
 * Wrong reveal codes (docs/security.md, "API keys, reveal codes and webhook endpoints"): a code is
 * used up after CODE_ATTEMPTS wrong tries; a key is locked for good after KEY_FAILURES wrong codes
 * in all, whatever new codes were asked for; and an account accepts at most ACCOUNT_FAILURES wrong
 * codes over all its keys in ACCOUNT_WINDOW_HOURS, then no reveal at all until the window moves on.
 * Reaching either limit e-mails the account's owners.
 */
export const REVEAL_LIMITS = {
  CODE_ATTEMPTS: 5,
  KEY_FAILURES: 10,
  ACCOUNT_FAILURES: 20,
  ACCOUNT_WINDOW_HOURS: 24,
} as const;

/**
 * Codes mailed (a key's first code and every new one asked for), per key and per account's keys
 * in all, each per hour: the owners' mailbox is not a channel anyone with keys:manage can flood.
 */
export const REVEAL_CODE_LIMITS = {
  PER_KEY: { max: 5, windowSeconds: 3600 },
  PER_ACCOUNT: { max: 20, windowSeconds: 3600 },
} as const;

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

const revealLocked = () =>
  new ApiError(
    409,
    "api_key_reveal_locked",
    `Too many wrong codes were entered for this key (${REVEAL_LIMITS.KEY_FAILURES}): it can no longer be revealed. ` +
      "Revoke it and create a new one; the account's owners were told by e-mail.",
  );

/** The addresses of the account's owners, who receive reveal codes and the alerts about them. */
async function ownerAddresses(tx: Tx, accountId: string): Promise<string[]> {
  const r = await tx.query<{ email: string }>(
    `select u.email from internal.memberships m join internal.users u on u.id = m.user_id
     where m.account_id = $1 and m.role = 'owner' and u.email is not null and u.deleted_at is null
     order by u.email`,
    [accountId],
  );
  return r.rows.map((o) => o.email);
}

/** E-mails a new six-digit reveal code to the owners of the key's account; older codes stop working. */
export async function sendRevealCode(
  db: Db,
  mailer: Mailer,
  keyId: string,
): Promise<{ sent_to: string[]; expires_at: string }> {
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  const sent = await db.asService(async (tx) => {
    const key = (
      await tx.query<{
        tenant_id: string;
        account_id: string;
        name: string;
        prefix: string;
        status: string;
        locked: boolean;
      }>(
        `select tenant_id, account_id, name, prefix, status, reveal_locked_at is not null as locked
         from internal.api_keys where id = $1 for update`,
        [keyId],
      )
    ).rows[0];
    if (!key) throw new ApiError(404, "resource_missing", `No API key with id ${keyId}.`);
    if (key.status !== "pending_reveal") throw notPending(key.status);
    // A new code gives a locked key no new tries: its wrong codes count for good.
    if (key.locked) throw revealLocked();
    for (const [name, subject, limit] of [
      ["key", keyId, REVEAL_CODE_LIMITS.PER_KEY],
      ["account", key.account_id, REVEAL_CODE_LIMITS.PER_ACCOUNT],
    ] as const) {
      // Counted in this transaction: only a code that is sent counts.
      const r = await consumeIn(tx, `reveal-codes:${name}:${subject}`, limit);
      if (!r.allowed) {
        throw new ApiError(
          429,
          "verification_codes_exceeded",
          `Too many verification codes were sent for ${name === "key" ? "this key" : "this account's keys"} ` +
            `(${limit.max} an hour). Use the last code sent, or ask again in ${r.retryAfter} s.`,
          { headers: { "Retry-After": String(r.retryAfter) } },
        );
      }
    }
    const owners = await ownerAddresses(tx, key.account_id);
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
        to: owner,
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
      sent_to: owners.map(mask),
      expires_at: (r.rows[0]?.expires_at ?? new Date()).toISOString(),
    };
  });
  // Committed: send it now from this process too (the notice of migration 0014 wakes every started mailer).
  void mailer.deliver();
  return sent;
}

interface RevealKeyRow {
  tenant_id: string;
  account_id: string;
  name: string;
  prefix: string;
  mode: KeyMode;
  status: string;
  reveal_code_hash: string | null;
  code_expired: boolean;
  reveal_attempts: number;
  reveal_failures: number;
  locked: boolean;
}

/**
 * Counts a wrong code against its code, its key (locked at KEY_FAILURES) and its account (the
 * window of ACCOUNT_FAILURES), in the reveal's transaction, which commits; tells the owners when a
 * limit is reached.
 */
async function countWrongCode(tx: Tx, mailer: Mailer, keyId: string, key: RevealKeyRow): Promise<void> {
  const locks = key.reveal_failures + 1 >= REVEAL_LIMITS.KEY_FAILURES;
  await tx.query(
    `update internal.api_keys set reveal_attempts = reveal_attempts + 1, reveal_failures = reveal_failures + 1,
       reveal_locked_at = case when $2 then now() end,
       reveal_code_hash = case when $2 then null else reveal_code_hash end
     where id = $1`,
    [keyId, locks],
  );
  await tx.query(
    `delete from internal.api_key_reveal_failures
     where account_id = $1 and failed_at <= now() - make_interval(hours => $2)`,
    [key.account_id, REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS],
  );
  const counted = (
    await tx.query<{ failures: number; alerted: boolean }>(
      `with added as (insert into internal.api_key_reveal_failures (account_id, key_id) values ($1, $2))
       select count(*)::int + 1 as failures, coalesce(bool_or(alerted), false) as alerted
       from internal.api_key_reveal_failures
       where account_id = $1 and failed_at > now() - make_interval(hours => $3)`,
      [key.account_id, keyId, REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS],
    )
  ).rows[0] ?? { failures: 1, alerted: false };
  const accountLimited = counted.failures >= REVEAL_LIMITS.ACCOUNT_FAILURES && !counted.alerted;
  if (accountLimited) {
    await tx.query(
      `update internal.api_key_reveal_failures set alerted = true
       where id = (select max(id) from internal.api_key_reveal_failures where account_id = $1)`,
      [key.account_id],
    );
  }
  const label = `"${key.name || key.prefix}" (${key.prefix}...)`;
  const alerts: { kind: string; subject: string; text: string[] }[] = [];
  if (locks) {
    alerts.push({
      kind: "api_key.reveal_locked",
      subject: "An API key of your account was locked",
      text: [
        `${REVEAL_LIMITS.KEY_FAILURES} wrong verification codes were entered to reveal the API key ${label} of your account.`,
        "",
        "The key is now locked: it can never be revealed. Someone who can manage the account's keys may be",
        "trying to guess a code. If that was not you, review who administers the account and its API keys.",
        "Revoke the locked key and create a new one if you need it.",
      ],
    });
  }
  if (accountLimited) {
    alerts.push({
      kind: "api_key.reveal_limited",
      subject: "API key reveals of your account are paused",
      text: [
        `${counted.failures} wrong verification codes were entered for the API keys of your account in the last ` +
          `${REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS} hours (the last one for the key ${label}).`,
        "",
        "No key of the account can be revealed until fewer wrong codes fall within that window. Someone who can",
        "manage the account's keys may be trying to guess codes: review who administers the account and its keys.",
      ],
    });
  }
  if (alerts.length === 0) return;
  const owners = await ownerAddresses(tx, key.account_id);
  for (const alert of alerts) {
    for (const owner of owners) {
      await mailer.enqueue(tx, {
        tenantId: key.tenant_id,
        to: owner,
        kind: alert.kind,
        subject: alert.subject,
        text: alert.text.join("\n"),
      });
    }
  }
}

/** Checks the code and, if it holds, makes the key's secret: returned here once, stored only as a hash. */
export async function revealKey(
  db: Db,
  mailer: Mailer,
  keyId: string,
  code: string,
): Promise<{ row: Record<string, unknown>; secret: string }> {
  const outcome = await db.asService(async (tx) => {
    const key = (
      await tx.query<RevealKeyRow>(
        `select tenant_id, account_id, name, prefix, mode, status, reveal_code_hash,
                coalesce(reveal_code_expires_at <= now(), true) as code_expired, reveal_attempts, reveal_failures,
                reveal_locked_at is not null as locked
         from internal.api_keys where id = $1 for update`,
        [keyId],
      )
    ).rows[0];
    if (!key) return { kind: "missing" as const };
    if (key.status !== "pending_reveal") return { kind: "revealed" as const, status: key.status };
    if (key.locked) return { kind: "key_locked" as const };
    // Reveals of one account are counted one at a time, so that concurrent guesses on several of
    // its keys cannot pass the account's limit together.
    await tx.query("select pg_advisory_xact_lock(hashtextextended('api_key_reveal:' || $1, 0))", [
      key.account_id,
    ]);
    const window = (
      await tx.query<{ failures: number; retry_after: number | null }>(
        `select count(*)::int as failures,
                ceil(extract(epoch from min(failed_at) + make_interval(hours => $2) - now()))::int as retry_after
         from internal.api_key_reveal_failures
         where account_id = $1 and failed_at > now() - make_interval(hours => $2)`,
        [key.account_id, REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS],
      )
    ).rows[0];
    if ((window?.failures ?? 0) >= REVEAL_LIMITS.ACCOUNT_FAILURES) {
      return { kind: "account_limited" as const, retryAfter: Math.max(1, window?.retry_after ?? 1) };
    }
    if (!key.reveal_code_hash || key.reveal_attempts >= REVEAL_LIMITS.CODE_ATTEMPTS) {
      return { kind: "no_code" as const };
    }
    if (key.code_expired) return { kind: "expired" as const };
    if (codeHash(keyId, code) !== key.reveal_code_hash) {
      await countWrongCode(tx, mailer, keyId, key);
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
    case "key_locked":
      throw revealLocked();
    case "account_limited":
      throw new ApiError(
        429,
        "reveal_attempts_exceeded",
        `Too many wrong codes were entered for this account's keys (${REVEAL_LIMITS.ACCOUNT_FAILURES} in ` +
          `${REVEAL_LIMITS.ACCOUNT_WINDOW_HOURS} hours): no key can be revealed until ${outcome.retryAfter} s from now. ` +
          "The account's owners were told by e-mail.",
        { headers: { "Retry-After": String(outcome.retryAfter) } },
      );
    case "no_code":
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
