import http from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/**
 * A webhook receiver as an account runs one: a real HTTP server on 127.0.0.1 that verifies every
 * request with the `standardwebhooks` package (what docs/webhooks.md tells receivers to use) and
 * answers as each route is told to. Routes are paths, one per endpoint under test.
 */

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Per secret of the route, in order: whether `standardwebhooks` verified the request with it. */
  verifiedBy: boolean[];
  /** Wall-clock time it arrived (ms). */
  at: number;
}

/** An answer, or "hang": the request is held open until `release()` or close. */
export type Reply = { status: number; headers?: Record<string, string>; body?: string } | "hang";

/** Decides the answer to the `n`th request (from 1) of a route. */
export type Respond = (request: Received, n: number) => Reply;

export interface Route {
  path: string;
  url: string;
  received: Received[];
  /** Replace the route's behaviour. */
  respond: Respond;
  secrets: string[];
}

function verify(secret: string, body: string, headers: Record<string, string>): boolean {
  try {
    new Webhook(secret).verify(body, headers);
    return true;
  } catch {
    return false;
  }
}

export class WebhookReceiver {
  readonly url: string;
  private readonly server: http.Server;
  private readonly routes = new Map<string, Route>();
  private readonly hung: { path: string; res: http.ServerResponse }[] = [];

  private constructor(server: http.Server, url: string) {
    this.server = server;
    this.url = url;
  }

  static async start(): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = http.createServer((req, res) => receiver?.handle(req, res));
    // Many dispatcher connections at once in the racing tests.
    server.maxConnections = 10_000;
    server.keepAliveTimeout = 10_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    receiver = new WebhookReceiver(server, `http://127.0.0.1:${port}`);
    return receiver;
  }

  /** A new route (`path` made unique), verified with `secrets`, answering 204 unless told otherwise. */
  route(name: string, options: { secrets?: string[]; respond?: Respond } = {}): Route {
    const path = `/${name}-${Math.random().toString(36).slice(2, 8)}`;
    const route: Route = {
      path,
      url: `${this.url}${path}`,
      received: [],
      respond: options.respond ?? (() => ({ status: 204 })),
      secrets: options.secrets ?? [],
    };
    this.routes.set(path, route);
    return route;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const route = this.routes.get(path);
      if (!route) {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks).toString("utf8");
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
      const received: Received = {
        path,
        headers,
        body,
        verifiedBy: route.secrets.map((s) => verify(s, body, headers)),
        at: Date.now(),
      };
      route.received.push(received);
      const reply = route.respond(received, route.received.length);
      if (reply === "hang") {
        this.hung.push({ path, res });
        return;
      }
      res.writeHead(reply.status, reply.headers).end(reply.body);
    });
  }

  /** Answers the held requests (of `path`, or all) with `status`. */
  release(path?: string, status = 500): void {
    for (let i = this.hung.length - 1; i >= 0; i--) {
      const h = this.hung[i];
      if (!h || (path && h.path !== path)) continue;
      this.hung.splice(i, 1);
      if (!h.res.destroyed) h.res.writeHead(status).end();
    }
  }

  /** Waits until the route has `count` requests; fails after `timeoutMs`. */
  async waitFor(route: Route, count: number, timeoutMs = 10_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (route.received.length < count) {
      if (Date.now() > deadline) {
        throw new Error(`${route.path}: ${route.received.length} of ${count} requests after ${timeoutMs} ms`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return route.received;
  }

  async close(): Promise<void> {
    for (const h of this.hung.splice(0)) h.res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
