import { isIP } from "node:net";
import path from "node:path";
import { z } from "zod";
import { type BackupSchedule, parseSchedule } from "./backup/schedule.ts";
import type { StatementTimeouts } from "./db/db.ts";
import type { S3Settings } from "./storage/s3.ts";
import { TRANSFORM_LIMITS } from "./storage/transform.ts";
import type { UploadLimits } from "./storage/uploads.ts";

/**
 * One schema over the environment, parsed once at boot. Every setting Backline reads is here,
 * and the README's configuration table is this list. Modules receive the parsed `Config`;
 * nothing below `src/start` reads `process.env` itself.
 */
/** Schemas of Backline's own that /rest/v1 must never serve, whatever REST_SCHEMAS says. */
const RESERVED_SCHEMAS = ["internal", "auth", "storage", "information_schema"];

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"], { message: "must be true or false" })
  .transform((v) => v === "true" || v === "1" || v === "yes");

const postgresUrl = z
  .string()
  .refine((v) => /^postgres(ql)?:\/\//.test(v), { message: "must be a postgres:// or postgresql:// URL" });

const MIB = 1024 * 1024;
const bytes = (min: number, max: number) =>
  z.coerce
    .number({ message: "must be a number of bytes" })
    .int({ message: "must be a whole number of bytes" })
    .min(min, { message: `must be at least ${min} bytes` })
    .max(max, { message: `must be at most ${max} bytes` });

/** A statement timeout: milliseconds, 0 for none, at most an hour. */
const millis = () =>
  z.coerce
    .number({ message: "must be a number of milliseconds" })
    .int({ message: "must be a whole number of milliseconds" })
    .min(0, { message: "must be 0 (no limit) to 3600000 milliseconds" })
    .max(3_600_000, { message: "must be 0 (no limit) to 3600000 milliseconds" });

/** A TCP port; 0: any free one. */
const port = () =>
  z.coerce
    .number({ message: "must be a port number" })
    .int({ message: "must be a whole number" })
    .min(0, { message: "must be between 0 and 65535" })
    .max(65535, { message: "must be between 0 and 65535" });

/**
 * Whose X-Forwarded-For entries to believe (docs/security.md, "Behind a proxy"): nobody's; the
 * nearest `hops` proxies' (the client address is the entry the farthest of them appended); or
 * proxies at these addresses (`proxies`: CIDR ranges, a single address as /32 or /128).
 * `fromTrue`: the setting was `true`, which once trusted every entry; the server warns once when
 * a request names more than one (src/http/trust-proxy.ts).
 */
export type TrustProxy = false | { hops: number; fromTrue: boolean } | { proxies: string[] };

const MAX_PROXY_HOPS = 10;
const TRUST_PROXY_FORMS = `must be false, true (one proxy), the number of proxies in front (1 to ${MAX_PROXY_HOPS}), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8`;

/** A list of proxy addresses and CIDR ranges as `address/prefix` strings, or what is wrong with it. */
function parseProxyList(value: string): { proxies: string[] } | { problem: string } {
  const proxies: string[] = [];
  for (const item of value.split(",")) {
    const entry = item.trim();
    const [address = "", prefix, ...rest] = entry.split("/");
    const family = entry.includes("%") || rest.length > 0 ? 0 : isIP(address);
    const bits = family === 4 ? 32 : 128;
    if (family === 0 || (prefix !== undefined && (!/^[0-9]{1,3}$/.test(prefix) || Number(prefix) > bits))) {
      // The whole value when it is one word (`maybe`); the entry at fault within a list.
      if (entry === value.trim()) return { problem: TRUST_PROXY_FORMS };
      const what = entry === "" ? "an empty entry" : JSON.stringify(entry);
      return { problem: `${TRUST_PROXY_FORMS}; ${what} is neither an address nor a CIDR range` };
    }
    if (prefix !== undefined && Number(prefix) === 0) {
      return {
        problem: `must not trust every address (${entry}): clients write the first X-Forwarded-For entries themselves, so list only the proxies`,
      };
    }
    proxies.push(`${address}/${prefix === undefined ? bits : Number(prefix)}`);
  }
  return { proxies };
}

const trustProxy = z.string().transform((value, ctx): TrustProxy => {
  if (value === "false" || value === "0" || value === "no") return false;
  if (value === "true" || value === "yes") return { hops: 1, fromTrue: true };
  if (/^[0-9]+$/.test(value)) {
    const hops = Number(value);
    if (hops <= MAX_PROXY_HOPS) return { hops, fromTrue: false };
    ctx.addIssue({ code: "custom", message: TRUST_PROXY_FORMS });
    return z.NEVER;
  }
  const list = parseProxyList(value);
  if ("proxies" in list) return list;
  ctx.addIssue({ code: "custom", message: list.problem });
  return z.NEVER;
});

const schema = z.object({
  PORT: port().default(54321),
  HOST: z.string().min(1).default("127.0.0.1"),
  PUBLIC_URL: z.url({ message: "must be an absolute URL such as https://api.example.com" }).optional(),
  DATA_DIR: z.string().min(1).default("./.backline"),
  DATABASE_URL: postgresUrl.optional(),
  MIGRATION_DATABASE_URL: postgresUrl.optional(),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(10),
  PGLITE_SHARED_BUFFERS: z
    .string()
    .regex(/^[1-9][0-9]{0,5}(kB|MB|GB)$/, { message: "must be a size such as 32MB" })
    .default("8MB"),
  PGLITE_THREAD: z.enum(["worker", "main"], { message: "must be worker or main" }).default("worker"),
  DATABASE_QUEUE_MAX: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(0)
    .max(100_000)
    .default(100),
  DATABASE_QUEUE_TIMEOUT_MS: z.coerce
    .number({ message: "must be a number of milliseconds" })
    .int({ message: "must be a whole number of milliseconds" })
    .min(1)
    .max(600_000)
    .default(1000),
  MIGRATE_ON_START: bool.default(true),
  DEV_TENANT: bool.optional(),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(10_000),
  SMTP_URL: z
    .string()
    .refine((v) => /^smtps?:\/\//.test(v), { message: "must be an smtp:// or smtps:// URL" })
    .optional(),
  MAIL_FROM: z.string().min(3).default("Backline <no-reply@backline.local>"),
  TRUST_PROXY: trustProxy.default(false),
  STATEMENT_TIMEOUT_ANON_MS: millis().default(3000),
  STATEMENT_TIMEOUT_AUTHENTICATED_MS: millis().default(8000),
  STATEMENT_TIMEOUT_SERVICE_MS: millis().default(60_000),
  REST_MAX_ROWS: z.coerce.number({ message: "must be a number" }).int().min(1).max(100_000).default(1000),
  REST_PLAN_ENABLED: bool.default(false),
  REST_SCHEMAS: z
    .string()
    .default("public")
    .transform((v) => v.split(",").map((x) => x.trim()))
    .refine((list) => list.every((x) => /^[a-z_][a-z0-9_]*$/.test(x)), {
      message: "must be schema names (lower case letters, digits, _), comma-separated",
    })
    .refine((list) => list.every((x) => !RESERVED_SCHEMAS.includes(x) && !x.startsWith("pg_")), {
      message: `must not name Backline's own schemas (${RESERVED_SCHEMAS.join(", ")}) or pg_ ones`,
    })
    .refine((list) => new Set(list).size === list.length, { message: "names a schema twice" }),
  WORKER: z.enum(["on", "off"], { message: "must be on or off" }).default("on"),
  WORKER_CONCURRENCY: z.coerce.number({ message: "must be a number" }).int().min(1).max(100).default(4),
  ENCRYPTION_KEY: z
    .string()
    .refine((v) => Buffer.from(v, "base64").length === 32, {
      message: "must be 32 random bytes in base64 (openssl rand -base64 32)",
    })
    .optional(),
  ENCRYPTION_KEY_PREVIOUS: z
    .string()
    .refine((v) => v.split(",").every((k) => Buffer.from(k.trim(), "base64").length === 32), {
      message: "must be 32-byte keys in base64, separated by commas",
    })
    .optional(),
  WEBHOOK_ALLOW_PRIVATE: bool.optional(),
  OIDC_ALLOW_PRIVATE: bool.optional(),
  CONSOLE_TENANT: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, { message: "must be a tenant's slug" })
    .optional(),
  WORKER_LEASE_MS: z.coerce
    .number({ message: "must be a number" })
    .int()
    .min(1000)
    .max(3_600_000)
    .default(60_000),
  STORAGE_DRIVER: z.enum(["local", "s3"], { message: "must be local or s3" }).default("local"),
  S3_ENDPOINT: z.url({ message: "must be an absolute URL such as https://s3.example.com" }).optional(),
  S3_BUCKET: z
    .string()
    .min(3, { message: "must be a bucket name of 3 to 63 characters" })
    .max(63, { message: "must be a bucket name of 3 to 63 characters" })
    .optional(),
  S3_REGION: z.string().min(1).default("us-east-1"),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: bool.default(false),
  S3_MULTIPART_THRESHOLD_BYTES: bytes(5 * MIB, 5 * 1024 * MIB).default(100 * MIB),
  S3_PART_SIZE_BYTES: bytes(5 * MIB, 5 * 1024 * MIB).default(64 * MIB),
  UPLOAD_URL_TTL_SECONDS: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number of seconds" })
    .min(60, { message: "must be 60 to 86400 seconds" })
    .max(86_400, { message: "must be 60 to 86400 seconds" })
    .default(900),
  UPLOAD_MAX_ARTWORK_BYTES: bytes(1, 1024 * MIB).default(50 * MIB),
  UPLOAD_MAX_AUDIO_BYTES: bytes(1, 5 * 1024 * MIB).default(2 * 1024 * MIB),
  ROYALTY_IMPORT_MAX_BYTES: bytes(1, 1024 * 1024 * MIB).default(2 * 1024 * MIB),
  IMAGE_TRANSFORM_MAX_BYTES: bytes(1, 1024 * MIB).default(50 * MIB),
  IMAGE_TRANSFORM_MAX_PIXELS: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number of pixels" })
    .min(1_000_000, { message: "must be 1000000 to 1000000000 pixels" })
    .max(1_000_000_000, { message: "must be 1000000 to 1000000000 pixels" })
    .default(100_000_000),
  IMAGE_TRANSFORM_TIMEOUT_SECONDS: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number of seconds" })
    .min(1, { message: "must be 1 to 300 seconds" })
    .max(300, { message: "must be 1 to 300 seconds" })
    .default(10),
  WORKER_STORE_CONCURRENCY: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(1)
    .max(100)
    .default(2),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(1)
    .max(1000)
    .default(10),
  METRICS_TOKEN: z
    .string()
    .regex(/^[\x21-\x7e]{16,512}$/, {
      message: "must be 16 to 512 printable characters without spaces (openssl rand -hex 32)",
    })
    .optional(),
  METRICS_PORT: port().optional(),
  METRICS_HOST: z.string().min(1).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .url({
      protocol: /^https?$/,
      message: "must be an http:// or https:// URL such as http://collector:4318",
    })
    .optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({
      protocol: /^https?$/,
      message: "must be an http:// or https:// URL such as http://collector:4318/v1/traces",
    })
    .optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(200).default("backline"),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce
    .number({ message: "must be a number of milliseconds" })
    .int({ message: "must be a whole number of milliseconds" })
    .min(1, { message: "must be 1 to 600000 milliseconds" })
    .max(600_000, { message: "must be 1 to 600000 milliseconds" })
    .default(5000),
  RATE_LIMIT_SYNC_MS: z.coerce
    .number({ message: "must be a number of milliseconds" })
    .int({ message: "must be a whole number of milliseconds" })
    .min(0, { message: "must be 0 (off) or 50 to 60000 milliseconds" })
    .max(60_000, { message: "must be 0 (off) or 50 to 60000 milliseconds" })
    .refine((v) => v === 0 || v >= 50, { message: "must be 0 (off) or 50 to 60000 milliseconds" })
    .default(250),
  BACKUP_SCHEDULE: z
    .string()
    .transform((value, ctx): BackupSchedule => {
      const parsed = parseSchedule(value);
      if ("problem" in parsed) {
        ctx.addIssue({ code: "custom", message: parsed.problem });
        return z.NEVER;
      }
      return parsed;
    })
    .optional(),
  BACKUP_DIR: z.string().min(1).optional(),
  BACKUP_KEEP: z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(1, { message: "must be 1 to 10000" })
    .max(10_000, { message: "must be 1 to 10000" })
    .default(7),
  DDEX_ERNC_SCHEMA_DIR: z.string().min(1).optional(),
});

export type Env = z.input<typeof schema>;

export interface Config {
  port: number;
  host: string;
  /** The address clients use; written to dev-tenant.json. */
  publicUrl: string;
  dataDir: string;
  database:
    | { engine: "pglite"; dataDir: string; thread: "worker" | "main"; sharedBuffers: string }
    | { engine: "postgres"; url: string; migrationUrl: string; poolSize: number };
  /** How many requests may wait for a database connection, and for how long, before a 503 (docs/security.md). */
  databaseQueue: { maxWaiting: number; maxWaitMs: number };
  migrateOnStart: boolean;
  /**
   * The tenant GET /console/tenant.json answers without ?slug= (docs/console.md): a slug, or
   * undefined for the development tenant (if there is one).
   */
  consoleTenant: string | undefined;
  /** Create the development tenant and write dev-tenant.json on start. */
  devTenant: boolean;
  logLevel: z.infer<typeof schema>["LOG_LEVEL"];
  shutdownTimeoutMs: number;
  /**
   * Whose X-Forwarded-For to believe for the client address (per-address rate limits, the audit
   * log): nobody's unless TRUST_PROXY says which proxies are in front.
   */
  trustProxy: TrustProxy;
  /** The most rows one /rest/v1 response returns, whatever the request asks (PostgREST's db-max-rows). */
  restMaxRows: number;
  /** `Accept: application/vnd.pgrst.plan` answers a statement's plan to a service-role key (PostgREST's db-plan-enabled). */
  restPlanEnabled: boolean;
  /** The schemas /rest/v1 serves (Accept-Profile/Content-Profile), the first being the default. */
  restSchemas: string[];
  /** Each request statement's time limit per role on PostgreSQL (ms, 0: none); not for workers or the CLI. */
  statementTimeouts: StatementTimeouts;
  /** The operator backend's worker: inside `npm start` unless off (then run `backline worker`). */
  worker: { enabled: boolean; concurrency: number; leaseMs: number; perStore: number };
  /** Webhook sends in flight at once to one endpoint, per process. */
  webhookEndpointConcurrency: number;
  /** The key that encrypts secrets at rest (webhook signing secrets); unset: DATA_DIR/encryption.key. */
  encryptionKey: string | undefined;
  /** Keys that still open what they sealed while the master key is rotated (docs/security.md). */
  encryptionKeyPrevious: string[];
  /**
   * Webhooks may go to http:// and loopback, private and link-local addresses: for development and
   * tests only, off unless WEBHOOK_ALLOW_PRIVATE=true (the server warns at start when it is on).
   */
  webhookAllowPrivate: boolean;
  /**
   * A tenant's OpenID Connect providers may be on http:// and loopback, private and link-local
   * addresses: for development and tests only, off unless OIDC_ALLOW_PRIVATE=true (warned at start).
   */
  oidcAllowPrivate: boolean;
  /** Where uploaded media goes (docs/uploads.md): DATA_DIR/storage, or an S3-compatible bucket. */
  storage: { driver: "local"; root: string } | { driver: "s3"; s3: S3Settings };
  uploads: UploadLimits;
  /** The largest report POST /admin/v1/royalty-imports takes (the CLI reads files of any size). */
  royaltyImportMaxBytes: number;
  /** PostgreSQL: how often each process shares its rate-limit counts with the others (ms; 0: never). */
  rateLimitSyncMs: number;
  /**
   * GET /metrics (docs/operations.md, "Metrics and alerts"): off unless a token or a port is set.
   * With `port`, only there (on `host`); with only `token`, on the API's port. The token, when set,
   * is required as `Authorization: Bearer` wherever /metrics is served.
   */
  metrics: { token: string | undefined; port: number | undefined; host: string };
  /** OpenTelemetry tracing over OTLP/HTTP, when an endpoint is set; undefined: off (the SDK is not loaded). */
  tracing: { tracesUrl: string; serviceName: string; exportDelayMs: number } | undefined;
  /**
   * Scheduled backups run by the worker (docs/operations.md, "Scheduled backups"): off unless
   * BACKUP_SCHEDULE is set; into BACKUP_DIR (DATA_DIR/backups), the newest BACKUP_KEEP kept.
   */
  backup: { schedule: BackupSchedule | undefined; dir: string; keep: number };
  /**
   * The folder holding DDEX's ERN choreography 1.8 schema (ern-choreography-sftp.xsd with its
   * allowed-value-sets.xsd and xmldsig-core-schema.xsd), against which stores' acknowledgement
   * messages are validated (docs/ddex.md); unset: they are kept aside, unread.
   */
  ddexErncSchemaDir: string | undefined;
  mail: {
    /** SMTP server for outgoing mail; without it mail stays in the local mailbox (`backline mail list`). */
    smtpUrl: string | undefined;
    from: string;
  };
}

export class ConfigError extends Error {
  readonly setting: string;

  constructor(setting: string, problem: string) {
    super(`Invalid configuration: ${setting} ${problem}`);
    this.name = "ConfigError";
    this.setting = setting;
  }
}

/** Settings that may hold credentials. */
const SECRET_SETTINGS = new Set([
  "ENCRYPTION_KEY",
  "ENCRYPTION_KEY_PREVIOUS",
  "DATABASE_URL",
  "MIGRATION_DATABASE_URL",
  "SMTP_URL",
  "S3_SECRET_ACCESS_KEY",
  "METRICS_TOKEN",
]);

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings mean "unset", as in most .env tooling.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const setting = String(issue?.path[0] ?? "environment");
    const value = cleaned[setting];
    // A bad secret is named, never echoed: the message goes to logs.
    const shown =
      value === undefined || SECRET_SETTINGS.has(setting) ? "" : ` (got ${JSON.stringify(value)})`;
    throw new ConfigError(setting, `${issue?.message ?? "is invalid"}${shown}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);
  const displayHost = e.HOST === "0.0.0.0" || e.HOST === "::" ? "localhost" : e.HOST;
  const database: Config["database"] = e.DATABASE_URL
    ? {
        engine: "postgres",
        url: e.DATABASE_URL,
        migrationUrl: e.MIGRATION_DATABASE_URL ?? e.DATABASE_URL,
        poolSize: e.DATABASE_POOL_SIZE,
      }
    : {
        engine: "pglite",
        dataDir: path.join(dataDir, "pgdata"),
        thread: e.PGLITE_THREAD,
        sharedBuffers: e.PGLITE_SHARED_BUFFERS,
      };
  if (e.STORAGE_DRIVER === "s3" && !e.S3_BUCKET) {
    throw new ConfigError("S3_BUCKET", "is required when STORAGE_DRIVER is s3");
  }
  if (Boolean(e.S3_ACCESS_KEY_ID) !== Boolean(e.S3_SECRET_ACCESS_KEY)) {
    throw new ConfigError("S3_ACCESS_KEY_ID", "and S3_SECRET_ACCESS_KEY are set together or not at all");
  }
  if (e.METRICS_PORT !== undefined && e.METRICS_PORT !== 0 && e.METRICS_PORT === e.PORT) {
    throw new ConfigError("METRICS_PORT", `must differ from PORT (both are ${e.PORT})`);
  }
  const otlpBase = e.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, "");
  const tracesUrl = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (otlpBase ? `${otlpBase}/v1/traces` : undefined);
  const storage: Config["storage"] =
    e.STORAGE_DRIVER === "s3"
      ? {
          driver: "s3",
          s3: {
            endpoint: e.S3_ENDPOINT,
            bucket: e.S3_BUCKET as string,
            region: e.S3_REGION,
            accessKeyId: e.S3_ACCESS_KEY_ID,
            secretAccessKey: e.S3_SECRET_ACCESS_KEY,
            forcePathStyle: e.S3_FORCE_PATH_STYLE,
            multipartThreshold: e.S3_MULTIPART_THRESHOLD_BYTES,
            partSize: e.S3_PART_SIZE_BYTES,
          },
        }
      : { driver: "local", root: path.join(dataDir, "storage") };
  return {
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PUBLIC_URL ?? `http://${displayHost}:${e.PORT}`).replace(/\/+$/, ""),
    dataDir,
    database,
    databaseQueue: { maxWaiting: e.DATABASE_QUEUE_MAX, maxWaitMs: e.DATABASE_QUEUE_TIMEOUT_MS },
    migrateOnStart: e.MIGRATE_ON_START,
    // The development tenant is a convenience of the embedded database; on PostgreSQL it must be asked for.
    devTenant: e.DEV_TENANT ?? database.engine === "pglite",
    consoleTenant: e.CONSOLE_TENANT,
    logLevel: e.LOG_LEVEL,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    trustProxy: e.TRUST_PROXY,
    restMaxRows: e.REST_MAX_ROWS,
    restPlanEnabled: e.REST_PLAN_ENABLED,
    restSchemas: e.REST_SCHEMAS,
    statementTimeouts: {
      anon: e.STATEMENT_TIMEOUT_ANON_MS,
      authenticated: e.STATEMENT_TIMEOUT_AUTHENTICATED_MS,
      service: e.STATEMENT_TIMEOUT_SERVICE_MS,
    },
    worker: {
      enabled: e.WORKER === "on",
      concurrency: e.WORKER_CONCURRENCY,
      leaseMs: e.WORKER_LEASE_MS,
      perStore: e.WORKER_STORE_CONCURRENCY,
    },
    webhookEndpointConcurrency: e.WEBHOOK_ENDPOINT_CONCURRENCY,
    encryptionKey: e.ENCRYPTION_KEY,
    encryptionKeyPrevious: e.ENCRYPTION_KEY_PREVIOUS?.split(",").map((k) => k.trim()) ?? [],
    // Off on every engine: any API key holder registers webhook URLs, and a local address would
    // point the server at itself or its network (docs/security.md, "Outbound calls").
    webhookAllowPrivate: e.WEBHOOK_ALLOW_PRIVATE ?? false,
    // Off likewise: a tenant's admin sets its identity providers' issuer (docs/auth.md).
    oidcAllowPrivate: e.OIDC_ALLOW_PRIVATE ?? false,
    storage,
    uploads: {
      urlTtlSeconds: e.UPLOAD_URL_TTL_SECONDS,
      maxBytes: { artwork: e.UPLOAD_MAX_ARTWORK_BYTES, audio: e.UPLOAD_MAX_AUDIO_BYTES },
      transform: {
        ...TRANSFORM_LIMITS,
        maxSourceBytes: e.IMAGE_TRANSFORM_MAX_BYTES,
        maxInputPixels: e.IMAGE_TRANSFORM_MAX_PIXELS,
        timeoutSeconds: e.IMAGE_TRANSFORM_TIMEOUT_SECONDS,
      },
    },
    royaltyImportMaxBytes: e.ROYALTY_IMPORT_MAX_BYTES,
    rateLimitSyncMs: e.RATE_LIMIT_SYNC_MS,
    metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_HOST ?? e.HOST },
    tracing: tracesUrl
      ? { tracesUrl, serviceName: e.OTEL_SERVICE_NAME, exportDelayMs: e.OTEL_BSP_SCHEDULE_DELAY }
      : undefined,
    mail: { smtpUrl: e.SMTP_URL, from: e.MAIL_FROM },
    backup: {
      schedule: e.BACKUP_SCHEDULE,
      dir: path.resolve(e.BACKUP_DIR ?? path.join(dataDir, "backups")),
      keep: e.BACKUP_KEEP,
    },
    ddexErncSchemaDir: e.DDEX_ERNC_SCHEMA_DIR ? path.resolve(e.DDEX_ERNC_SCHEMA_DIR) : undefined,
  };
}
