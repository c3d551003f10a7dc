/**
 * HTTP calls to addresses that someone other than the installation's owner chose — a tenant's
 * OpenID Connect provider today (its discovery document, key set, token and userinfo endpoints,
 * whose addresses the provider's own document names). Like webhooks (src/webhooks/ssrf.ts), they
 * go over https to public addresses only: every address a name resolves to is checked when the
 * socket connects, and the connection is pinned to the addresses checked, so a name that answers
 * a private address the second time is refused too. `allowPrivate` (OIDC_ALLOW_PRIVATE, for a
 * provider on this machine in development and tests) lifts both rules. Redirects are not followed,
 * answers are capped in size and time.
 */
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { BlockedAddressError, bareHostname, classifyAddress, guardedLookup } from "../webhooks/ssrf.ts";

export interface OutboundOptions {
  allowPrivate: boolean;
  /** The largest answer read, in bytes (1 MiB by default). */
  maxBytes?: number;
}

/** The subset of fetch's options these calls use. */
export interface OutboundInit {
  method?: string;
  headers?: Record<string, string> | Headers;
  body?: string | URLSearchParams;
  signal?: AbortSignal | null;
  redirect?: string;
}

export type OutboundFetch = (url: string | URL, init?: OutboundInit) => Promise<Response>;

/** A refused address or scheme: the call never left the server. */
export class OutboundRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutboundRefused";
  }
}

export function guardedFetch(options: OutboundOptions): OutboundFetch {
  const lookup = guardedLookup({ allowPrivate: options.allowPrivate });
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  return (input, init = {}) => {
    let url: URL;
    try {
      url = new URL(String(input));
    } catch {
      return Promise.reject(new OutboundRefused(`not a URL: ${String(input)}`));
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && options.allowPrivate))
      return Promise.reject(new OutboundRefused(`${url.origin} is not https`));
    const host = bareHostname(url);
    // A socket does not call `lookup` for an IP literal: checked here.
    if (net.isIP(host) && !options.allowPrivate && classifyAddress(host) !== "public")
      return Promise.reject(new OutboundRefused(`${host} is not a public address`));
    const headers: Record<string, string> = {};
    if (init.headers instanceof Headers)
      init.headers.forEach((v, k) => {
        headers[k] = v;
      });
    else Object.assign(headers, init.headers ?? {});
    const body = init.body === undefined ? undefined : String(init.body);
    if (body !== undefined && init.body instanceof URLSearchParams)
      headers["content-type"] ??= "application/x-www-form-urlencoded";
    if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
    const transport = url.protocol === "https:" ? https : http;
    return new Promise<Response>((resolve, reject) => {
      const req = transport.request(
        url,
        {
          method: init.method ?? "GET",
          headers,
          lookup: lookup as unknown as net.LookupFunction,
          signal: init.signal ?? undefined,
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (chunk: Buffer) => {
            size += chunk.length;
            if (size > maxBytes) {
              res.destroy();
              reject(new OutboundRefused(`the answer of ${url.origin} is larger than ${maxBytes} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          res.on("error", reject);
          res.on("end", () => {
            const out = new Headers();
            for (const [k, v] of Object.entries(res.headers)) {
              if (typeof v === "string") out.set(k, v);
              else if (Array.isArray(v)) for (const one of v) out.append(k, one);
            }
            const status = res.statusCode ?? 502;
            const nullBody = status === 204 || status === 304 || (status >= 100 && status < 200);
            resolve(new Response(nullBody ? null : Buffer.concat(chunks), { status, headers: out }));
          });
        },
      );
      req.on("error", (error) =>
        reject(error instanceof BlockedAddressError ? new OutboundRefused(error.message) : error),
      );
      req.end(body);
    });
  };
}
