// The app the metrics benchmark loads (bench/metrics/run.ts), in a process of its own: the real
// buildApp over an embedded database in memory, with /metrics on (METRICS_TOKEN set in the
// environment) or off. Prints "ready" once it listens.
import { randomBytes } from "node:crypto";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { loadMigrations, migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { buildApp } from "../../src/http/app.ts";
import { SecretBox } from "../../src/secrets/box.ts";

const config = loadConfig(process.env);
const engine = await PgliteEngine.open({ queue: { maxWaiting: 10_000, maxWaitMs: 60_000 } });
await migrate(engine, loadMigrations());
const db = new Db(engine, { secrets: new SecretBox(randomBytes(32)) });
const app = buildApp({ config, db, logger: pino({ level: "warn" }) });
// The process's CPU time so far (µs): the benchmark divides its growth by the requests served,
// a figure other processes on a shared machine disturb far less than requests per second.
app.get("/bench/cpu", async () => {
  const { user, system } = process.cpuUsage();
  return { cpu_us: user + system };
});
await app.listen({ port: config.port, host: "127.0.0.1" });
process.stdout.write("ready\n");
process.once("SIGTERM", () => {
  void app
    .close()
    .then(() => db.close())
    .then(() => process.exit(0));
});
