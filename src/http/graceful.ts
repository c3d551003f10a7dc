import type { FastifyInstance } from "fastify";

/**
 * A stop no client sees as a reset (docs/operator.md, "Stopping"):
 *
 * 1. Stop accepting connections. Requests that arrive on an open keep-alive connection from now
 *    on are answered `503` with `Retry-After` and `Connection: close` (Fastify's
 *    return503OnClosing), so their clients know nothing ran and try again elsewhere.
 * 2. Requests in flight finish; their answers carry `Connection: close`, after which the client
 *    closes the connection itself.
 * 3. Keep-alive connections that stay idle are closed only after `idleGraceMs`. Closing an idle
 *    connection at once (what Node's server.close() does) races a client that is sending its
 *    next request on it at that moment: that client sees a reset.
 *
 * `closing(app)` is what the onSend hook reads to add `Connection: close`.
 */
const CLOSING = Symbol("backline.closing");

export function closing(app: FastifyInstance): boolean {
  return (app as unknown as Record<symbol, boolean>)[CLOSING] === true;
}

export async function gracefulClose(app: FastifyInstance, idleGraceMs: number): Promise<void> {
  (app as unknown as Record<symbol, boolean>)[CLOSING] = true;
  const server = app.server;
  const closeIdle = server.closeIdleConnections.bind(server);
  // server.close() would close idle connections at once: hold that back for the grace period.
  server.closeIdleConnections = () => {};
  const timer = setTimeout(closeIdle, idleGraceMs);
  timer.unref();
  try {
    await app.close();
  } finally {
    clearTimeout(timer);
    server.closeIdleConnections = closeIdle;
  }
}
