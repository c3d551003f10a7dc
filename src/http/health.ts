import type { FastifyInstance } from "fastify";
import type { Db } from "../db/db.ts";
import { migrationStatus } from "../db/migrate.ts";

/**
 * GET /health: the process is up (for liveness probes; touches nothing).
 * GET /ready: the database answers and its schema is current (for readiness probes and load balancers).
 */
export async function healthRoutes(app: FastifyInstance, opts: { db: Db }) {
  app.get("/health", async () => ({ status: "ok" }));

  app.get("/ready", async (_request, reply) => {
    try {
      const status = await opts.db.asService((tx) => migrationStatus(tx), { readOnly: true });
      const body = {
        status: status.pending.length === 0 ? "ready" : "migrations_pending",
        database: { engine: opts.db.kind, reachable: true },
        migrations: { applied: status.applied.length, pending: status.pending.map((m) => m.version) },
      };
      return reply.status(status.pending.length === 0 ? 200 : 503).send(body);
    } catch (error) {
      reply.log.warn({ err: error }, "readiness check failed");
      return reply.status(503).send({
        status: "database_unreachable",
        database: { engine: opts.db.kind, reachable: false },
      });
    }
  });
}
