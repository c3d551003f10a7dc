import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import { sendProblem } from "../http/problem.ts";
import { interfaceOf, Metrics, UNMATCHED_ROUTE } from "./metrics.ts";
import { annotateSpan } from "./trace-hooks.ts";

/**
 * Where /metrics is served (docs/operations.md, "Metrics and alerts"), as the settings decide:
 *
 * | METRICS_PORT | METRICS_TOKEN | /metrics                                                   |
 * |--------------|---------------|------------------------------------------------------------|
 * | unset        | unset         | nowhere: nothing is counted (the default)                  |
 * | unset        | set           | on the API's port, with `Authorization: Bearer <token>`    |
 * | set          | unset         | on its own port only (METRICS_HOST), for a private network |
 * | set          | set           | on its own port only, with the token                       |
 *
 * A missing or wrong token is answered `401 metrics_unauthorized` (problem details) with
 * `WWW-Authenticate: Bearer`, never the figures.
 */

export type MetricsSettings = Config["metrics"];

/** Whether this process serves /metrics at all. */
export function metricsEnabled(settings: MetricsSettings): boolean {
  return settings.port !== undefined || settings.token !== undefined;
}

/** The process's metrics, or undefined when /metrics is off (then requests cost nothing extra). */
export function createMetrics(config: Config, db: Db): Metrics | undefined {
  return metricsEnabled(config.metrics) ? new Metrics({ db }) : undefined;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** undefined when the request may read the metrics; otherwise why not. */
export function refusal(authorization: string | undefined, token: string | undefined): string | undefined {
  if (token === undefined) return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? "");
  if (!match?.[1])
    return "GET /metrics needs the METRICS_TOKEN setting's value in an Authorization: Bearer header.";
  // Compared as digests: the same length whatever was sent, in constant time.
  if (!timingSafeEqual(digest(match[1]), digest(token)))
    return "The bearer token is not this server's METRICS_TOKEN.";
  return undefined;
}

const CHALLENGE = 'Bearer realm="metrics"';

/**
 * The HTTP app's side: every answered request is counted (and, when tracing is on, its span named
 * after its route), and /metrics is served on the API's port when only a token protects it.
 */
export function instrumentHttp(
  app: FastifyInstance,
  options: { metrics: Metrics | undefined; db: Db; settings: MetricsSettings },
): void {
  const metrics =
    options.metrics ?? (metricsEnabled(options.settings) ? new Metrics({ db: options.db }) : undefined);
  const annotate = annotateSpan();
  if (annotate) {
    // The server span (src/observability/tracing.ts) is named by the route's template.
    app.addHook("onRequest", (request, _reply, done) => {
      const route = request.routeOptions.url;
      if (route) annotate(request.method, route);
      done();
    });
  }
  if (!metrics) return;
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url;
    const path = route ?? request.url;
    metrics.observe(
      interfaceOf(path),
      request.method,
      route ?? UNMATCHED_ROUTE,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
  // On its own port (listenForMetrics), or nowhere without a token: the API's port needs one.
  const token = options.settings.token;
  if (options.settings.port !== undefined || token === undefined) return;
  app.get("/metrics", async (request, reply) => {
    const refused = refusal(request.headers.authorization, token);
    if (refused) {
      reply.header("www-authenticate", CHALLENGE);
      return sendProblem(reply, request, { status: 401, code: "metrics_unauthorized", detail: refused });
    }
    const text = await metrics.scrape();
    return reply.type(metrics.contentType).header("cache-control", "no-store").send(text);
  });
}

/**
 * /metrics on its own port (METRICS_PORT, METRICS_HOST): a bare HTTP server, so a scrape never
 * queues behind the API's requests, and a worker process (`backline worker`), which serves no API,
 * can be scraped too. Answers GET /metrics, and 404 to anything else.
 */
export async function listenForMetrics(
  settings: MetricsSettings,
  metrics: Metrics | undefined,
  logger: Pick<Logger, "info" | "warn">,
): Promise<{ url: string; close(): Promise<void> } | undefined> {
  if (settings.port === undefined || !metrics) return undefined;
  const token = settings.token;
  const server = http.createServer((req, res) => {
    const problem = (status: number, code: string, detail: string) => {
      const body = {
        type: `https://backline.dev/errors/${code}`,
        title: status === 401 ? "Unauthorized" : "Not Found",
        status,
        detail,
        code,
        request_id: randomUUID(),
      };
      res.writeHead(status, {
        "content-type": "application/problem+json",
        ...(status === 401 ? { "www-authenticate": CHALLENGE } : {}),
      });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      return problem(404, "not_found", `No route for ${req.method} ${path}; this port serves GET /metrics.`);
    }
    const refused = refusal(req.headers.authorization, token);
    if (refused) return problem(401, "metrics_unauthorized", refused);
    metrics.scrape().then(
      (text) => {
        res.writeHead(200, { "content-type": metrics.contentType, "cache-control": "no-store" });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (error: unknown) => {
        logger.warn({ err: error }, "metrics: the scrape failed");
        res.writeHead(500, { "content-type": "text/plain" });
        res.end("the scrape failed\n");
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: settings.port, host: settings.host }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : settings.port;
  const url = `http://${settings.host.includes(":") ? `[${settings.host}]` : settings.host}:${port}/metrics`;
  logger.info({ url, token: token !== undefined }, "metrics: listening on their own port");
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
