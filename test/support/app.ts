import fs from "node:fs";
import type { FastifyInstance } from "fastify";
import pino, { type Logger } from "pino";
import { type Config, loadConfig } from "../../src/config.ts";
import { buildApp } from "../../src/http/app.ts";
import type { TenantKeys } from "../../src/tenancy/keys.ts";
import { type CreateTenantInput, createTenant, type Tenant } from "../../src/tenancy/tenants.ts";
import { TEST_ENCRYPTION_KEY, type TestDb } from "./db.ts";
import { freePort, tempDir } from "./process.ts";

/** The real app on a real socket, over a test database: what end-to-end tests talk to with real clients. */
export interface RunningApp {
  app: FastifyInstance;
  /** The configuration it runs with (its DATA_DIR, its encryption key). */
  config: Config;
  url: string;
  close(): Promise<void>;
}

export { TEST_ENCRYPTION_KEY };

/**
 * Its DATA_DIR (uploaded media) is a temporary folder unless `env` names one; every app of a test
 * run shares one ENCRYPTION_KEY, as the processes of one deployment do. It logs nowhere unless
 * given a `logger` (or TEST_LOG_LEVEL is set).
 */
export async function startApp(
  t: TestDb,
  env: Record<string, string> = {},
  options: { logger?: Logger } = {},
): Promise<RunningApp> {
  const port = await freePort();
  const ownDir = env.DATA_DIR ? undefined : tempDir("backline-app-");
  const config = loadConfig({
    PORT: String(port),
    LOG_LEVEL: "silent",
    DATA_DIR: ownDir ?? "",
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    ...env,
  });
  const logger = options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
  const app = buildApp({ config, db: t.db, logger });
  await app.listen({ port, host: "127.0.0.1" });
  return {
    app,
    config,
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await app.close();
      if (ownDir) fs.rmSync(ownDir, { recursive: true, force: true });
    },
  };
}

/**
 * A tenant with its keys; `auth` settings go to settings.auth (docs/auth.md). Submission needs no
 * uploaded media unless settings.require_media says so (the upload suites do).
 */
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
    // A GS1 prefix of GS1's restricted-circulation range: a release without a UPC gets one at submission.
    settings: {
      require_media: false,
      gs1_company_prefix: "2000000",
      ...rest.settings,
      ...(auth ? { auth } : {}),
    },
  });
}

/** Tenant settings lifting /rest/v1's rate limits, for suites that send thousands of requests from one user. */
export const UNLIMITED = {
  rest_rate_limits: {
    tenant: { max: 1_000_000, windowSeconds: 1 },
    caller: { max: 1_000_000, windowSeconds: 1 },
  },
};
