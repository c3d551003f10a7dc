import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A reverse proxy as nginx with `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`
 * (or AWS ALB) is one: it forwards every request upstream and appends the address of whoever
 * connected to it to X-Forwarded-For, after whatever the request already carried. Chain two for
 * two hops. It listens on `host` (127.0.0.1 unless given) and connects upstream from `via`, a
 * loopback address of its own (Linux answers on all of 127.0.0.0/8), so the next hop sees which
 * proxy it was.
 */
export interface ForwardingProxy {
  url: string;
  close(): Promise<void>;
}

export async function startForwardingProxy(
  upstream: string,
  options: { host?: string; via?: string } = {},
): Promise<ForwardingProxy> {
  const target = new URL(upstream);
  const server = http.createServer((req, res) => {
    const peer = req.socket.remoteAddress ?? "";
    const before = req.headers["x-forwarded-for"];
    const headers = { ...req.headers, "x-forwarded-for": before ? `${before}, ${peer}` : peer };
    delete headers.connection;
    const forwarded = http.request(
      {
        host: target.hostname.replace(/^\[|\]$/g, ""),
        port: target.port,
        localAddress: options.via,
        method: req.method,
        path: req.url,
        headers,
        agent: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, options.host ?? "127.0.0.1", resolve));
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(":") ? `[${address}]` : address}:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
