import type { FastifyInstance } from "fastify";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { buildApp } from "../../src/http/app.ts";
import type { TenantKeys } from "../../src/tenancy/keys.ts";
import { type CreateTenantInput, createTenant, type Tenant } from "../../src/tenancy/tenants.ts";
import type { TestDb } from "./db.ts";
import { freePort } from "./process.ts";

/** The real app on a real socket, over a test database: what end-to-end tests talk to with real clients. */
export interface RunningApp {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

export async function startApp(t: TestDb, env: Record<string, string> = {}): Promise<RunningApp> {
  const port = await freePort();
  const config = loadConfig({ PORT: String(port), LOG_LEVEL: "silent", ...env });
  const app = buildApp({ config, db: t.db, logger: pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }) });
  await app.listen({ port, host: "127.0.0.1" });
  return { app, url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

/** A tenant with its keys; `auth` settings go to settings.auth (docs/auth.md). */
export async function tenantWithKeys(
  t: TestDb,
  input: Partial<CreateTenantInput> & { auth?: Record<string, unknown> } = {},
): Promise<{ tenant: Tenant; keys: TenantKeys }> {
  const slug = input.slug ?? `t-${Math.random().toString(36).slice(2, 10)}`;
  const { auth, ...rest } = input;
  return createTenant(t.db, {
    name: `Tenant ${slug}`,
    slug,
    ...rest,
    settings: { ...rest.settings, ...(auth ? { auth } : {}) },
  });
}

/** Tenant settings lifting /rest/v1's rate limits, for suites that send thousands of requests from one user. */
export const UNLIMITED = {
  rest_rate_limits: {
    tenant: { max: 1_000_000, windowSeconds: 1 },
    caller: { max: 1_000_000, windowSeconds: 1 },
  },
};
