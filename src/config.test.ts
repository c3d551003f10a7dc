import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  test("defaults: embedded database under ./.backline, port 54321, a development tenant", () => {
    const c = loadConfig({});
    assert.equal(c.port, 54321);
    assert.equal(c.host, "127.0.0.1");
    assert.equal(c.dataDir, path.resolve(".backline"));
    assert.deepEqual(c.database, {
      engine: "pglite",
      dataDir: path.resolve(".backline/pgdata"),
      thread: "worker",
      sharedBuffers: "8MB",
    });
    assert.equal(c.publicUrl, "http://127.0.0.1:54321");
    assert.equal(c.devTenant, true);
    assert.equal(c.migrateOnStart, true);
  });

  test("DATABASE_URL switches to PostgreSQL; migrations use MIGRATION_DATABASE_URL when given", () => {
    const c = loadConfig({
      DATABASE_URL: "postgres://app@db/backline",
      MIGRATION_DATABASE_URL: "postgresql://owner@db/backline",
    });
    assert.deepEqual(c.database, {
      engine: "postgres",
      url: "postgres://app@db/backline",
      migrationUrl: "postgresql://owner@db/backline",
      poolSize: 10,
    });
    assert.equal(c.devTenant, false, "no development tenant on PostgreSQL unless asked");
    assert.equal(loadConfig({ DATABASE_URL: "postgres://a@b/c", DEV_TENANT: "true" }).devTenant, true);
  });

  test("PUBLIC_URL wins over HOST and PORT, without a trailing slash; 0.0.0.0 shows as localhost", () => {
    assert.equal(loadConfig({ PUBLIC_URL: "https://api.example.com/" }).publicUrl, "https://api.example.com");
    assert.equal(loadConfig({ HOST: "0.0.0.0", PORT: "8080" }).publicUrl, "http://localhost:8080");
  });

  test("the worker runs inside the server unless WORKER=off", () => {
    assert.deepEqual(loadConfig({}).worker, { enabled: true, concurrency: 4, leaseMs: 60_000, perStore: 2 });
    assert.deepEqual(loadConfig({ WORKER: "off", WORKER_CONCURRENCY: "8", WORKER_LEASE_MS: "5000" }).worker, {
      enabled: false,
      concurrency: 8,
      leaseMs: 5000,
      perStore: 2,
    });
  });

  test("/metrics: off by default; a token, a port of its own (on HOST unless METRICS_HOST), or both", () => {
    assert.deepEqual(loadConfig({}).metrics, { token: undefined, port: undefined, host: "127.0.0.1" });
    const token = "0123456789abcdef0123456789abcdef";
    assert.deepEqual(loadConfig({ METRICS_TOKEN: token }).metrics, {
      token,
      port: undefined,
      host: "127.0.0.1",
    });
    assert.deepEqual(loadConfig({ HOST: "0.0.0.0", METRICS_PORT: "9464" }).metrics, {
      token: undefined,
      port: 9464,
      host: "0.0.0.0",
    });
    assert.deepEqual(
      loadConfig({ METRICS_PORT: "9464", METRICS_HOST: "10.0.0.5", METRICS_TOKEN: token }).metrics,
      {
        token,
        port: 9464,
        host: "10.0.0.5",
      },
    );
    // The token is a secret: a bad one is named, never echoed.
    assert.throws(
      () => loadConfig({ METRICS_TOKEN: "tiny secret" }),
      (e: unknown) => e instanceof ConfigError && !e.message.includes("tiny"),
    );
  });

  test("tracing: off unless an OTLP endpoint is set; /v1/traces under it, or the traces endpoint as given", () => {
    assert.equal(loadConfig({}).tracing, undefined);
    assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing, {
      tracesUrl: "http://collector:4318/v1/traces",
      serviceName: "backline",
      exportDelayMs: 5000,
    });
    assert.deepEqual(
      loadConfig({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://otel.example.com/traces",
        OTEL_SERVICE_NAME: "backline-eu",
        OTEL_BSP_SCHEDULE_DELAY: "1000",
      }).tracing,
      { tracesUrl: "https://otel.example.com/traces", serviceName: "backline-eu", exportDelayMs: 1000 },
    );
  });

  test("webhooks go to private addresses on no engine unless WEBHOOK_ALLOW_PRIVATE says so", () => {
    assert.equal(loadConfig({}).webhookAllowPrivate, false);
    assert.equal(loadConfig({ DATABASE_URL: "postgres://u@h/db" }).webhookAllowPrivate, false);
    assert.equal(
      loadConfig({ DATABASE_URL: "postgres://u@h/db", WEBHOOK_ALLOW_PRIVATE: "true" }).webhookAllowPrivate,
      true,
    );
    assert.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE: "false" }).webhookAllowPrivate, false);
    assert.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE: "true" }).webhookAllowPrivate, true);
    const key = Buffer.alloc(32, 7).toString("base64");
    assert.equal(loadConfig({ ENCRYPTION_KEY: key }).encryptionKey, key);
    assert.equal(loadConfig({}).encryptionKey, undefined);
    const old = Buffer.alloc(32, 8).toString("base64");
    assert.deepEqual(loadConfig({ ENCRYPTION_KEY_PREVIOUS: `${old}, ${key}` }).encryptionKeyPrevious, [
      old,
      key,
    ]);
    assert.deepEqual(loadConfig({}).encryptionKeyPrevious, []);
  });

  test("uploads go to DATA_DIR/storage unless STORAGE_DRIVER=s3 names a bucket", () => {
    const local = loadConfig({ DATA_DIR: "/var/lib/backline" });
    assert.deepEqual(local.storage, { driver: "local", root: "/var/lib/backline/storage" });
    assert.deepEqual(local.uploads, {
      urlTtlSeconds: 900,
      maxBytes: { artwork: 50 * 1024 * 1024, audio: 2 * 1024 * 1024 * 1024 },
      // Image transforms (docs/uploads.md): sized to the largest cover an upload takes.
      transform: {
        concurrency: 2,
        maxDimension: 2500,
        maxInputPixels: 100_000_000,
        maxSourceBytes: 50 * 1024 * 1024,
        queue: 16,
        timeoutSeconds: 10,
      },
    });
    const s3 = loadConfig({
      STORAGE_DRIVER: "s3",
      S3_BUCKET: "masters",
      S3_ENDPOINT: "http://127.0.0.1:9000",
      S3_ACCESS_KEY_ID: "id",
      S3_SECRET_ACCESS_KEY: "secret",
      S3_FORCE_PATH_STYLE: "true",
      UPLOAD_URL_TTL_SECONDS: "120",
    });
    assert.deepEqual(s3.storage, {
      driver: "s3",
      s3: {
        endpoint: "http://127.0.0.1:9000",
        bucket: "masters",
        region: "us-east-1",
        accessKeyId: "id",
        secretAccessKey: "secret",
        forcePathStyle: true,
        multipartThreshold: 100 * 1024 * 1024,
        partSize: 64 * 1024 * 1024,
      },
    });
    assert.equal(s3.uploads.urlTtlSeconds, 120);
  });

  test("the admin API takes royalty reports up to ROYALTY_IMPORT_MAX_BYTES (default 2 GiB)", () => {
    assert.equal(loadConfig({}).royaltyImportMaxBytes, 2 * 1024 * 1024 * 1024);
    assert.equal(loadConfig({ ROYALTY_IMPORT_MAX_BYTES: "1048576" }).royaltyImportMaxBytes, 1_048_576);
  });

  test("statement timeouts per request role: Supabase's 3 s, 8 s and 60 s unless set; 0 is none; bad values refused", () => {
    assert.deepEqual(loadConfig({}).statementTimeouts, { anon: 3000, authenticated: 8000, service: 60_000 });
    assert.deepEqual(
      loadConfig({
        STATEMENT_TIMEOUT_ANON_MS: "500",
        STATEMENT_TIMEOUT_AUTHENTICATED_MS: "0",
        STATEMENT_TIMEOUT_SERVICE_MS: "120000",
      }).statementTimeouts,
      { anon: 500, authenticated: 0, service: 120_000 },
    );
    for (const bad of ["-1", "1.5", "soon", "3600001"]) {
      assert.throws(
        () => loadConfig({ STATEMENT_TIMEOUT_ANON_MS: bad }),
        (e: unknown) => e instanceof ConfigError && e.setting === "STATEMENT_TIMEOUT_ANON_MS",
        bad,
      );
    }
  });

  test("TRUST_PROXY: off by default; true is one proxy; a number of proxies; or the proxies' addresses", () => {
    assert.equal(loadConfig({}).trustProxy, false);
    for (const off of ["false", "0", "no"])
      assert.equal(loadConfig({ TRUST_PROXY: off }).trustProxy, false, off);
    // true never trusts every entry any more: one hop, remembered as "true" for the warning.
    assert.deepEqual(loadConfig({ TRUST_PROXY: "true" }).trustProxy, { hops: 1, fromTrue: true });
    assert.deepEqual(loadConfig({ TRUST_PROXY: "yes" }).trustProxy, { hops: 1, fromTrue: true });
    assert.deepEqual(loadConfig({ TRUST_PROXY: "1" }).trustProxy, { hops: 1, fromTrue: false });
    assert.deepEqual(loadConfig({ TRUST_PROXY: "2" }).trustProxy, { hops: 2, fromTrue: false });
    assert.deepEqual(loadConfig({ TRUST_PROXY: "10" }).trustProxy, { hops: 10, fromTrue: false });
    assert.deepEqual(loadConfig({ TRUST_PROXY: "127.0.0.0/8" }).trustProxy, { proxies: ["127.0.0.0/8"] });
    // Single addresses become /32 and /128; IPv6 ranges; spaces after the commas.
    assert.deepEqual(loadConfig({ TRUST_PROXY: "10.0.0.7, ::1,fd00::/8 , 192.168.0.0/16" }).trustProxy, {
      proxies: ["10.0.0.7/32", "::1/128", "fd00::/8", "192.168.0.0/16"],
    });
  });

  test("DDEX_ERNC_SCHEMA_DIR: unset by default; a folder, resolved", () => {
    assert.equal(loadConfig({}).ddexErncSchemaDir, undefined);
    assert.equal(
      loadConfig({ DDEX_ERNC_SCHEMA_DIR: "schemas/ernc" }).ddexErncSchemaDir,
      path.resolve("schemas/ernc"),
    );
  });

  test("STORAGE_DRIVER=s3 needs S3_BUCKET", () => {
    assert.throws(
      () => loadConfig({ STORAGE_DRIVER: "s3" }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.setting === "S3_BUCKET" &&
        e.message === "Invalid configuration: S3_BUCKET is required when STORAGE_DRIVER is s3",
    );
  });

  test("empty values count as unset", () => {
    assert.equal(loadConfig({ PORT: "", DATABASE_URL: "" }).database.engine, "pglite");
  });

  const bad: [Record<string, string>, string][] = [
    [{ PORT: "abc" }, 'Invalid configuration: PORT must be a port number (got "abc")'],
    [{ PORT: "1.5" }, 'Invalid configuration: PORT must be a whole number (got "1.5")'],
    [{ PORT: "-1" }, 'Invalid configuration: PORT must be between 0 and 65535 (got "-1")'],
    [
      { DATABASE_URL: "mysql://x" },
      "Invalid configuration: DATABASE_URL must be a postgres:// or postgresql:// URL",
    ],
    [{ DEV_TENANT: "sure" }, 'Invalid configuration: DEV_TENANT must be true or false (got "sure")'],
    [{ WORKER: "maybe" }, 'Invalid configuration: WORKER must be on or off (got "maybe")'],
    [
      { ENCRYPTION_KEY: "c2hvcnQ=" },
      "Invalid configuration: ENCRYPTION_KEY must be 32 random bytes in base64 (openssl rand -base64 32)",
    ],
    [
      { ENCRYPTION_KEY_PREVIOUS: `${Buffer.alloc(32).toString("base64")},c2hvcnQ=` },
      "Invalid configuration: ENCRYPTION_KEY_PREVIOUS must be 32-byte keys in base64, separated by commas",
    ],
    [{ STORAGE_DRIVER: "ftp" }, 'Invalid configuration: STORAGE_DRIVER must be local or s3 (got "ftp")'],
    [
      { S3_ACCESS_KEY_ID: "id", STORAGE_DRIVER: "s3", S3_BUCKET: "masters" },
      "Invalid configuration: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are set together or not at all",
    ],
    [
      { S3_BUCKET: "b" },
      'Invalid configuration: S3_BUCKET must be a bucket name of 3 to 63 characters (got "b")',
    ],
    [
      { S3_PART_SIZE_BYTES: "1024" },
      'Invalid configuration: S3_PART_SIZE_BYTES must be at least 5242880 bytes (got "1024")',
    ],
    [
      { UPLOAD_URL_TTL_SECONDS: "5" },
      'Invalid configuration: UPLOAD_URL_TTL_SECONDS must be 60 to 86400 seconds (got "5")',
    ],
    [
      { ROYALTY_IMPORT_MAX_BYTES: "0" },
      'Invalid configuration: ROYALTY_IMPORT_MAX_BYTES must be at least 1 bytes (got "0")',
    ],
    [
      { ROYALTY_IMPORT_MAX_BYTES: "1.5" },
      'Invalid configuration: ROYALTY_IMPORT_MAX_BYTES must be a whole number of bytes (got "1.5")',
    ],
    [
      { METRICS_TOKEN: "short" },
      "Invalid configuration: METRICS_TOKEN must be 16 to 512 printable characters without spaces (openssl rand -hex 32)",
    ],
    [
      { METRICS_TOKEN: "a token with spaces in it" },
      "Invalid configuration: METRICS_TOKEN must be 16 to 512 printable characters without spaces (openssl rand -hex 32)",
    ],
    [
      { METRICS_PORT: "99999" },
      'Invalid configuration: METRICS_PORT must be between 0 and 65535 (got "99999")',
    ],
    [{ METRICS_PORT: "54321" }, "Invalid configuration: METRICS_PORT must differ from PORT (both are 54321)"],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" },
      'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL such as http://collector:4318 (got "collector:4318")',
    ],
    [
      { OTEL_BSP_SCHEDULE_DELAY: "0" },
      'Invalid configuration: OTEL_BSP_SCHEDULE_DELAY must be 1 to 600000 milliseconds (got "0")',
    ],
    [
      { PUBLIC_URL: "not a url" },
      'Invalid configuration: PUBLIC_URL must be an absolute URL such as https://api.example.com (got "not a url")',
    ],
    [
      { TRUST_PROXY: "sometimes" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8 (got "sometimes")`,
    ],
    [
      { TRUST_PROXY: "TRUE" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8 (got "TRUE")`,
    ],
    [
      { TRUST_PROXY: "11" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8 (got "11")`,
    ],
    [
      { TRUST_PROXY: "1.5" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8 (got "1.5")`,
    ],
    [
      { TRUST_PROXY: "-1" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8 (got "-1")`,
    ],
    [
      { TRUST_PROXY: "10.0.0.1,10.0.0.300" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8; "10.0.0.300" is neither an address nor a CIDR range (got "10.0.0.1,10.0.0.300")`,
    ],
    [
      { TRUST_PROXY: "10.0.0.0/8,fd00::/129" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8; "fd00::/129" is neither an address nor a CIDR range (got "10.0.0.0/8,fd00::/129")`,
    ],
    [
      { TRUST_PROXY: "10.0.0.0/33,::1" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8; "10.0.0.0/33" is neither an address nor a CIDR range (got "10.0.0.0/33,::1")`,
    ],
    [
      { TRUST_PROXY: "10.0.0.1,,10.0.0.2" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8; an empty entry is neither an address nor a CIDR range (got "10.0.0.1,,10.0.0.2")`,
    ],
    [
      { TRUST_PROXY: "nginx.internal,10.0.0.2" },
      `Invalid configuration: TRUST_PROXY must be false, true (one proxy), the number of proxies in front (1 to 10), or a comma-separated list of the proxies' addresses and CIDR ranges such as 10.0.0.0/8,fd00::/8; "nginx.internal" is neither an address nor a CIDR range (got "nginx.internal,10.0.0.2")`,
    ],
    [
      { TRUST_PROXY: "10.0.0.2,0.0.0.0/0" },
      'Invalid configuration: TRUST_PROXY must not trust every address (0.0.0.0/0): clients write the first X-Forwarded-For entries themselves, so list only the proxies (got "10.0.0.2,0.0.0.0/0")',
    ],
    [
      { TRUST_PROXY: "::/0" },
      'Invalid configuration: TRUST_PROXY must not trust every address (::/0): clients write the first X-Forwarded-For entries themselves, so list only the proxies (got "::/0")',
    ],
  ];
  for (const [env, message] of bad) {
    test(`refuses ${JSON.stringify(env)}`, () => {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) =>
          e instanceof ConfigError && e.message === message && e.setting === Object.keys(env)[0],
      );
    });
  }
});
