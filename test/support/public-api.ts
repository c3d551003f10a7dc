import assert from "node:assert/strict";
import type { Db } from "../../src/db/db.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import type { Account, Tenant } from "../../src/tenancy/tenants.ts";
import { seedAccount, seedTenant } from "./seed.ts";

/** Helpers for /api/public/v1 suites: keys issued on the operator's path, and a small fetch client. */

export interface IssuedKey {
  id: string;
  secret: string;
  accountId: string;
}

export async function issueTestKey(
  db: Db,
  account: Account,
  options: { mode?: "live" | "test"; scopes?: string[]; name?: string; expiresAt?: Date } = {},
): Promise<IssuedKey> {
  const { row, secret } = await issueKey(db, {
    accountId: account.id,
    mode: options.mode ?? "live",
    ...(options.scopes ? { scopes: options.scopes } : {}),
    ...(options.name ? { name: options.name } : {}),
    ...(options.expiresAt ? { expiresAt: options.expiresAt } : {}),
  });
  return { id: String(row.id), secret, accountId: String(row.account_id) };
}

/** A tenant with one account and a live key for it. */
export async function keyedAccount(
  db: Db,
  options: { scopes?: string[]; tenant?: Tenant } = {},
): Promise<{ tenant: Tenant; account: Account; key: IssuedKey }> {
  const tenant = options.tenant ?? (await seedTenant(db));
  const account = await seedAccount(db, tenant, `Label ${Math.random().toString(36).slice(2, 8)}`);
  const key = await issueTestKey(db, account, options.scopes ? { scopes: options.scopes } : {});
  return { tenant, account, key };
}

export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

/** Calls the public API at `baseUrl` (the app's URL) with a bearer token; bodies are JSON. */
export function publicApi(baseUrl: string, token: string | undefined) {
  return async <T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<ApiResponse<T>> => {
    const res = await fetch(`${baseUrl}/api/public/v1${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: the test sees the text
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  };
}

/** A release date far enough ahead for any lead time. */
export const FUTURE_DATE = (() => {
  const d = new Date(Date.now() + 60 * 86_400_000);
  return d.toISOString().slice(0, 10);
})();

/** A release body that passes submit once it has a track with an ISRC. */
export const completeRelease = (overrides: Record<string, unknown> = {}) => ({
  title: "Night Drive",
  release_type: "single",
  artist_name: "Luna Vale",
  primary_genre: "electronic",
  release_date: FUTURE_DATE,
  licensed_territories_include: "WW",
  services: ["spotify", "apple_music"],
  ...overrides,
});

export interface FieldError {
  param: string;
  code: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  param?: string;
  errors?: FieldError[];
  request_id: string;
}

export interface List<T = Record<string, unknown>> {
  object: string;
  data: T[];
  total: number;
  limit: number;
  offset: number;
  has_more: boolean;
}

/** An error response in the API's one shape (RFC 9457 problem details with a code). */
export function assertProblem(res: ApiResponse<unknown>, status: number, code: string): Problem {
  const body = res.body as Problem;
  assert.equal(res.status, status, `expected ${status} ${code}, got ${res.status}: ${JSON.stringify(body)}`);
  assert.equal(body.code, code, JSON.stringify(body));
  assert.equal(body.status, status);
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/);
  assert.equal(typeof body.detail, "string");
  assert.equal(typeof body.request_id, "string");
  return body;
}

/** A 422 (or `status`) listing exactly these [param, code] pairs, each with a message. */
export function assertFieldErrors(
  res: ApiResponse<unknown>,
  expected: [string, string][],
  code = "validation_failed",
  status = 422,
): FieldError[] {
  const body = assertProblem(res, status, code);
  assert.ok(Array.isArray(body.errors), `errors[] missing: ${JSON.stringify(body)}`);
  for (const e of body.errors) {
    assert.deepEqual(Object.keys(e).sort(), ["code", "message", "param"]);
    assert.ok(e.message.length > 0);
  }
  assert.deepEqual(
    body.errors.map((e) => `${e.param} ${e.code}`).sort(),
    expected.map(([param, c]) => `${param} ${c}`).sort(),
    JSON.stringify(body.errors),
  );
  return body.errors;
}

export function expectStatus<T>(res: ApiResponse<T>, status: number): T {
  assert.equal(res.status, status, JSON.stringify(res.body));
  return res.body;
}

/** Fresh ISRCs with a registrant prefix (`USBKL`), so tracks never collide across tests. */
export function isrcs(prefix: string): () => string {
  let seq = 0;
  return () => `${prefix}26${String(++seq).padStart(5, "0")}`;
}

/** YYYY-MM-DD `days` from today (UTC). */
export const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
