import { createHash } from "node:crypto";
import { requestScope } from "../db/admission.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { ApiError } from "./errors.ts";

/**
 * Idempotency-Key on POST (docs/public-api.md, "Idempotent requests"), as Stripe does it: the
 * first request with a key runs and its response is kept for 24 hours, per account (or user),
 * method and path. A retry with the same key and body gets that response again, marked
 * `Idempotent-Replayed: true`; a retry while the first still runs gets 409; the same key with a
 * different body gets 422. Responses of 5xx are not kept, so a retry after a server failure runs
 * again. A request that never finished (its process died) frees its key after LOCK_SECONDS — unless
 * its work had committed: each write transaction of the request marks the key applied in its own
 * commit (`applied`, migration 0028), and a retry of an applied key whose answer was never
 * recorded is told so (409 idempotency_response_lost) instead of running the request again.
 * A response holding a secret shown once is kept only encrypted with `seal` (response_ciphertext,
 * migration 0013), never as plain JSON.
 */
export interface StoredResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

export type Claimed =
  | {
      kind: "run";
      /** Marks the key applied inside one of the request's write transactions (with its work). */
      applied: (tx: Tx) => Promise<void>;
      finish: (r: StoredResponse) => Promise<void>;
    }
  | { kind: "replay"; response: StoredResponse };

const LOCK_SECONDS = 120;
const KEY = /^[\x21-\x7e]{1,255}$/;

export function requestHash(method: string, path: string, body: unknown, caller?: string): string {
  return createHash("sha256")
    .update(`${method} ${path}\n${JSON.stringify(body ?? null)}${caller === undefined ? "" : `\n${caller}`}`)
    .digest("hex");
}

/** What encrypts a kept response that holds a secret (the server's SecretBox). */
export interface Sealer {
  encrypt(plain: string): string;
  decrypt(sealed: string): string;
}

function open(seal: Sealer, sealed: string): unknown {
  try {
    return JSON.parse(seal.decrypt(sealed));
  } catch {
    return undefined;
  }
}

export async function claimIdempotencyKey(
  db: Db,
  input: { owner: string; method: string; path: string; key: string; hash: string; seal?: Sealer },
): Promise<Claimed> {
  if (!KEY.test(input.key)) {
    throw new ApiError(
      400,
      "invalid_idempotency_key",
      "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID is a good choice).",
      { param: "Idempotency-Key" },
    );
  }
  const ids = [input.owner, input.method, input.path, input.key];
  const outcome = await db.asService(async (tx) => {
    // Expired records are forgotten: the key is new again.
    await tx.query(
      `delete from internal.idempotency_keys
       where owner = $1 and method = $2 and path = $3 and key = $4 and expires_at <= now()`,
      ids,
    );
    const inserted = await tx.query(
      `insert into internal.idempotency_keys (owner, method, path, key, request_hash, locked_until)
       values ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
       on conflict do nothing returning key`,
      [...ids, input.hash, LOCK_SECONDS],
    );
    if (inserted.rowCount > 0) {
      // Now and then, forget every expired record.
      if (Math.random() < 0.01)
        await tx.query("delete from internal.idempotency_keys where expires_at <= now()");
      return { kind: "run" as const };
    }
    const row = (
      await tx.query<{
        request_hash: string;
        status: "running" | "done";
        lock_expired: boolean;
        applied: boolean;
        response_status: number | null;
        response_body: unknown;
        response_ciphertext: string | null;
        response_headers: Record<string, string> | null;
      }>(
        `select request_hash, status, locked_until <= now() as lock_expired, applied_at is not null as applied,
                response_status, response_body,
                response_ciphertext, response_headers
         from internal.idempotency_keys where owner = $1 and method = $2 and path = $3 and key = $4 for update`,
        ids,
      )
    ).rows[0];
    if (!row) return { kind: "retry" as const };
    if (row.request_hash !== input.hash) return { kind: "mismatch" as const };
    if (row.status === "done") {
      let body = row.response_body;
      if (row.response_ciphertext !== null) {
        const opened = input.seal ? open(input.seal, row.response_ciphertext) : undefined;
        // Sealed under a master key the server no longer has: the answer is lost, not replayable.
        if (opened === undefined) return { kind: "unreadable" as const };
        body = opened;
      }
      return {
        kind: "replay" as const,
        response: { status: row.response_status ?? 200, body, headers: row.response_headers ?? {} },
      };
    }
    if (!row.lock_expired) return { kind: "busy" as const };
    // Its process died after the work committed, before the answer was kept: never run it twice.
    if (row.applied) return { kind: "lost" as const };
    await tx.query(
      `update internal.idempotency_keys set locked_until = now() + make_interval(secs => $5)
       where owner = $1 and method = $2 and path = $3 and key = $4`,
      [...ids, LOCK_SECONDS],
    );
    return { kind: "run" as const };
  });

  switch (outcome.kind) {
    case "retry":
      return claimIdempotencyKey(db, input);
    case "mismatch":
      throw new ApiError(
        422,
        "idempotency_key_reused",
        "This Idempotency-Key was used with a different request; use a new key for a new request.",
        { param: "Idempotency-Key" },
      );
    case "busy":
      throw new ApiError(
        409,
        "idempotency_request_in_progress",
        "A request with this Idempotency-Key is still being processed; retry shortly.",
        { param: "Idempotency-Key", headers: { "Retry-After": "1" } },
      );
    case "unreadable":
      throw new ApiError(
        409,
        "idempotency_response_unavailable",
        "The answer kept for this Idempotency-Key can no longer be read (the server's encryption key changed); " +
          "check whether the first request took effect, then use a new key.",
        { param: "Idempotency-Key" },
      );
    case "lost":
      throw new ApiError(
        409,
        "idempotency_response_lost",
        "The first request with this Idempotency-Key took effect, but its answer was lost when the server stopped; " +
          "look the result up instead of retrying (a new key would do it again).",
        { param: "Idempotency-Key" },
      );
    case "replay":
      return outcome;
    case "run":
      return {
        kind: "run",
        applied: async (tx) => {
          await tx.query("select internal.idempotency_applied($1, $2, $3, $4)", ids);
        },
        // Not bounded by the request's wait for the database (src/db/admission.ts): the request
        // has run, and its key must be settled even when the database is busy — above all when
        // the answer is the busy 503 itself, which must free the key at once rather than hold it
        // "in progress" for LOCK_SECONDS. One short statement, waiting its turn as jobs do.
        finish: async (response) => {
          await requestScope.exit(() =>
            db.asService((tx) =>
              response.status >= 500
                ? tx.query(
                    "delete from internal.idempotency_keys where owner = $1 and method = $2 and path = $3 and key = $4",
                    ids,
                  )
                : tx.query(
                    `update internal.idempotency_keys
                   set status = 'done', response_status = $5, response_body = $6, response_ciphertext = $7,
                       response_headers = $8
                   where owner = $1 and method = $2 and path = $3 and key = $4`,
                    [
                      ...ids,
                      response.status,
                      input.seal ? null : JSON.stringify(response.body ?? null),
                      input.seal ? input.seal.encrypt(JSON.stringify(response.body ?? null)) : null,
                      JSON.stringify(response.headers),
                    ],
                  ),
            ),
          );
        },
      };
  }
}
