import net from "node:net";
import type { Logger } from "pino";
import { backupHandlers, scheduleBackups } from "../backup/scheduled.ts";
import { invoiceHandlers, scheduleInvoices } from "../billing/jobs.ts";
import { listenForCli } from "../cli/socket.ts";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import { openDatabase } from "../db/open.ts";
import { buildApp } from "../http/app.ts";
import { gracefulClose } from "../http/graceful.ts";
import { Worker } from "../jobs/worker.ts";
import { Mailer } from "../mail/mailer.ts";
import { createMetrics, listenForMetrics } from "../observability/http.ts";
import { startTracing } from "../observability/tracing.ts";
import { pipelineHandlers } from "../pipeline/handlers.ts";
import { scheduleStorePolls } from "../pipeline/store-inbox.ts";
import { refreshStoreGenreMaps } from "../pipeline/stores.ts";
import { LocalStore } from "../storage/local.ts";
import { LocalMedia, StoreMedia } from "../storage/media.ts";
import { openStorage } from "../storage/open.ts";
import { type DevTenantFile, ensureDevTenant } from "../tenancy/dev-tenant.ts";
import { WebhookDispatcher } from "../webhooks/dispatcher.ts";
import { loadSecretBox } from "../webhooks/secrets.ts";
import { warnUnsafeSettings } from "./process.ts";

export interface RunningServer {
  url: string;
  devTenant: DevTenantFile | undefined;
  close(): Promise<void>;
}

/** How long a stopping server leaves idle keep-alive connections open (src/http/graceful.ts). */
const IDLE_GRACE_MS = 1000;

/**
 * Fails at once, before the database is opened or migrated and before dev-tenant.json is written
 * with a URL no server would answer, when the port is taken (process.ts explains EADDRINUSE).
 */
async function checkPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** Opens the database (migrating it), prepares the development tenant, and listens. */
export async function serve(config: Config, logger: Logger): Promise<RunningServer> {
  await checkPortFree(config.port, config.host);
  if (config.metrics.port !== undefined) await checkPortFree(config.metrics.port, config.metrics.host);
  warnUnsafeSettings(config, logger);
  // Before anything listens or calls out (src/observability/tracing.ts); nothing is loaded when off.
  const tracing = await startTracing(config.tracing, logger);
  const db = await openDatabase(config, { migrate: config.migrateOnStart, logger });
  try {
    let devTenant: DevTenantFile | undefined;
    if (config.devTenant) {
      const dev = await ensureDevTenant(db, { dataDir: config.dataDir, url: config.publicUrl });
      devTenant = dev.file;
      logger.info(
        { path: dev.path, tenant_id: dev.file.tenant_id, created: dev.created },
        "development tenant ready",
      );
    }
    const metrics = createMetrics(config, db);
    const app = buildApp({ config, db, logger, metrics });
    await app.listen({ port: config.port, host: config.host });
    const metricsPort = await listenForMetrics(config.metrics, metrics, logger);
    // The operator backend runs in the same process unless WORKER=off (docs/operator.md).
    const background = config.worker.enabled ? startBackground(config, db, logger) : undefined;
    // On the embedded database, `backline` commands run here while the server holds DATA_DIR (docs/cli.md).
    const cli = await listenForCli(config, db, logger);
    return {
      url: config.publicUrl,
      devTenant,
      async close() {
        await cli?.close();
        await gracefulClose(app, IDLE_GRACE_MS);
        await metricsPort?.close();
        await background?.stop();
        await db.close();
        await tracing?.shutdown();
      },
    };
  } catch (error) {
    await db.close().catch(() => {});
    await tracing?.shutdown();
    throw error;
  }
}

/** Serves until SIGTERM or SIGINT, then stops accepting, lets requests in flight finish, and closes the database. */
export async function serveUntilSignalled(config: Config, logger: Logger): Promise<void> {
  const server = await serve(config, logger);
  if (server.devTenant) printDevTenant(server.devTenant, config.dataDir);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      logger.error({ timeout_ms: config.shutdownTimeoutMs }, "shutdown timed out; exiting");
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    try {
      await server.close();
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, "error during shutdown");
      process.exit(1);
    }
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
}

function printDevTenant(file: DevTenantFile, dataDir: string) {
  const lines = [
    "",
    "Backline is running with a development tenant.",
    "",
    `         API URL: ${file.url}`,
    `       tenant_id: ${file.tenant_id}`,
    `      account_id: ${file.account_id}`,
    `        anon key: ${file.anon_key}`,
    `service_role key: ${file.service_role_key}`,
    `    test API key: ${file.api_key}  (/api/public/v1, sandbox of the account)`,
    "",
    `Saved to ${dataDir}/dev-tenant.json. Keep the service_role key on the server side.`,
    "",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

/** `backline worker`: only the operator backend's worker, until SIGTERM or SIGINT (then it finishes the jobs in flight). */
export async function workUntilSignalled(config: Config, logger: Logger): Promise<void> {
  warnUnsafeSettings(config, logger);
  const tracing = await startTracing(config.tracing, logger);
  const db = await openDatabase(config, { migrate: config.migrateOnStart, logger });
  const background = startBackground(config, db, logger);
  const cli = await listenForCli(config, db, logger);
  // A worker serves no API: METRICS_PORT is how it is scraped (the pool, the queue, the process).
  const metricsPort = await listenForMetrics(config.metrics, createMetrics(config, db), logger);
  logger.info({ worker: background.workerId, concurrency: config.worker.concurrency }, "worker started");
  // The worker's own timers do not hold the process (nor does an idle embedded database): this
  // does, until a signal says stop.
  const alive = setInterval(() => {}, 1 << 30);
  const stop = async (signal: string) => {
    logger.info({ signal }, "worker stopping");
    clearInterval(alive);
    const timer = setTimeout(() => process.exit(1), config.shutdownTimeoutMs);
    timer.unref();
    await cli?.close();
    await metricsPort?.close();
    await background.stop();
    await db.close();
    await tracing?.shutdown();
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
}

/**
 * The operator backend's background work in this process: the job worker (review, delivery,
 * takedowns, OAC) and the webhook dispatcher. stop() lets what is in flight finish.
 */
function startBackground(
  config: Config,
  db: Db,
  logger: Logger,
): { workerId: string; stop(): Promise<void> } {
  const secrets = loadSecretBox(config);
  const storage = openStorage(config, secrets);
  const worker = new Worker({
    db,
    handlers: {
      ...pipelineHandlers(db, {
        media:
          storage.store instanceof LocalStore
            ? new LocalMedia(storage.store.root)
            : new StoreMedia(storage.store),
        store: storage.store,
        uploadLimits: config.uploads,
        ddexErncSchemaDir: config.ddexErncSchemaDir,
      }),
      // BACKUP_SCHEDULE's recurring backup (src/backup/scheduled.ts).
      ...backupHandlers(db, config, logger),
      // The monthly invoice run for white-label tenants (src/billing/jobs.ts).
      ...invoiceHandlers(db, logger),
    },
    concurrency: config.worker.concurrency,
    leaseMs: config.worker.leaseMs,
    // A store that hangs holds at most this many of the worker's slots (docs/operations.md).
    perGroup: { kinds: ["delivery.send"], field: "store", max: config.worker.perStore },
    logger,
  });
  const mailer = new Mailer(db, { smtpUrl: config.mail.smtpUrl, from: config.mail.from, logger });
  // Links and codes in sent mail are blanked once expired (docs/security.md).
  mailer.startSweeping();
  const dispatcher = new WebhookDispatcher({
    db,
    secrets,
    mailer,
    allowPrivate: config.webhookAllowPrivate,
    perEndpoint: config.webhookEndpointConcurrency,
    logger,
  });
  worker.start();
  // Every store with an enabled inbox has its recurring poll job (docs/ddex.md); one per store.
  scheduleStorePolls(db).catch((error: unknown) =>
    logger.warn({ err: error }, "scheduling store polls failed"),
  );
  // The stores' genre maps follow this version's dictionary files (docs/ddex.md, "Store dictionaries").
  refreshStoreGenreMaps(db).catch((error: unknown) =>
    logger.warn({ err: error }, "refreshing the stores' genre maps failed"),
  );
  scheduleBackups(db, config).catch((error: unknown) =>
    logger.warn({ err: error }, "scheduling backups failed"),
  );
  scheduleInvoices(db).catch((error: unknown) =>
    logger.warn({ err: error }, "scheduling the monthly invoice run failed"),
  );
  dispatcher.start();
  return {
    workerId: worker.id,
    async stop() {
      await Promise.all([worker.stop(), dispatcher.stop()]);
      await mailer.close();
    },
  };
}
