// The benchmark's webhook receiver: a node:http server on 127.0.0.1 in the benchmark's own process,
// one path per endpoint, that verifies the Standard Webhooks signature of every request (or of
// every `verifyEvery`th) with the `standardwebhooks` package, as docs/webhooks.md tells receivers
// to, and answers 204 (400 when the signature is wrong). It counts each webhook-id per endpoint
// and notes when each arrived (performance.now(), this process's clock).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { Webhook } from "standardwebhooks";

interface Route {
  index: number;
  webhook: Webhook;
}

/** What arrived since the last reset. */
export interface Tally {
  /** Per endpoint (by index): how many times each webhook-id arrived. */
  seen: Map<string, number>[];
  /** Per endpoint: when each webhook-id first arrived (performance.now()). */
  arrivedAt: Map<string, number>[];
  total: number;
  verified: number;
  badSignature: number;
  unknownPath: number;
  first: number;
  last: number;
}

export class BenchReceiver {
  readonly url: string;
  private readonly server: http.Server;
  private readonly routes = new Map<string, Route>();
  private readonly verifyEvery: number;
  private requests = 0;
  tally: Tally;

  private constructor(server: http.Server, url: string, verifyEvery: number) {
    this.server = server;
    this.url = url;
    this.verifyEvery = verifyEvery;
    this.tally = this.fresh();
  }

  static async start(verifyEvery: number): Promise<BenchReceiver> {
    let receiver: BenchReceiver | undefined;
    const server = http.createServer((req, res) => receiver?.handle(req, res));
    server.maxConnections = 10_000;
    // Longer than the senders' idle timeout (4 s), so they close idle connections first.
    server.keepAliveTimeout = 10_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", resolve);
    });
    const { port } = server.address() as AddressInfo;
    receiver = new BenchReceiver(server, `http://127.0.0.1:${port}`, Math.max(1, verifyEvery));
    return receiver;
  }

  /** A path for endpoint `index` (its position in the tally), verified with `secret`; its URL. */
  route(name: string, index: number, secret: string): string {
    const path = `/${name}`;
    this.routes.set(path, { index, webhook: new Webhook(secret) });
    return `${this.url}${path}`;
  }

  /** Starts a new tally for `endpoints` endpoints. */
  reset(endpoints: number): void {
    this.tally = this.fresh(endpoints);
  }

  private fresh(endpoints = 0): Tally {
    return {
      seen: Array.from({ length: endpoints }, () => new Map()),
      arrivedAt: Array.from({ length: endpoints }, () => new Map()),
      total: 0,
      verified: 0,
      badSignature: 0,
      unknownPath: 0,
      first: Number.NaN,
      last: Number.NaN,
    };
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = performance.now();
      const t = this.tally;
      const route = this.routes.get(req.url ?? "/");
      const seen = route && t.seen[route.index];
      const arrived = route && t.arrivedAt[route.index];
      if (!route || !seen || !arrived) {
        t.unknownPath++;
        res.writeHead(404).end();
        return;
      }
      const id = String(req.headers["webhook-id"] ?? "");
      if (this.requests++ % this.verifyEvery === 0) {
        try {
          route.webhook.verify(Buffer.concat(chunks).toString("utf8"), {
            "webhook-id": id,
            "webhook-timestamp": String(req.headers["webhook-timestamp"] ?? ""),
            "webhook-signature": String(req.headers["webhook-signature"] ?? ""),
          });
          t.verified++;
        } catch {
          t.badSignature++;
          res.writeHead(400).end();
          return;
        }
      }
      if (t.total === 0) t.first = at;
      t.last = at;
      t.total++;
      seen.set(id, (seen.get(id) ?? 0) + 1);
      if (!arrived.has(id)) arrived.set(id, at);
      res.writeHead(204).end();
    });
  }

  /** Resolves once `count` deliveries have arrived; rejects after `timeoutMs`. */
  async waitFor(count: number, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.tally.total < count) {
      if (Date.now() > deadline) {
        throw new Error(`${what}: ${this.tally.total} of ${count} deliveries after ${timeoutMs / 1000} s`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
