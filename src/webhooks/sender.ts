import http from "node:http";
import https from "node:https";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { BlockedAddressError, bareHostname, classifyAddress, guardedLookup, type Resolve } from "./ssrf.ts";

/**
 * One webhook POST (docs/webhooks.md, "What is sent"): the signed body to the endpoint, through
 * the SSRF guard (every connection's addresses checked and pinned), with a time limit, never
 * following a redirect, reading at most 1 KiB of the answer. Sending never throws: every way it
 * can end is an outcome, recorded in the delivery log.
 *
 * node:http/https rather than fetch: a socket's `lookup` is the simplest place to check and pin
 * the resolved address, and keep-alive agents of our own keep one process at thousands of
 * deliveries a second without a new connection each.
 */

export type Outcome =
  | "ok"
  | "http_status"
  | "timeout"
  | "connection"
  | "dns"
  | "blocked_address"
  | "redirect"
  | "tls";

export interface SendResult {
  outcome: Outcome;
  /** The answer's status, when one came. */
  statusCode?: number;
  durationMs: number;
  /** What went wrong, for the log (not set for ok). */
  error?: string;
  /** The first 1 KiB of the answer's body (an excerpt for the delivery log, never more). */
  responseBody?: string;
  /** From Retry-After on a 429 or 503 (seconds or an HTTP date), at most 24 h. */
  retryAfterMs?: number;
}

export interface SenderOptions {
  /** Allow http:// and private, loopback and link-local targets (development and tests). */
  allowPrivate: boolean;
  /** The whole request's time limit, from connecting to the end of the answer. */
  timeoutMs?: number;
  /** The resolver (tests inject one); the system's by default. */
  lookup?: Resolve;
  /** Connections kept open per host and port. */
  maxSocketsPerHost?: number;
}

export const USER_AGENT = "Backline-Webhooks/1";
/**
 * How much of an answer is read and kept in the delivery log: enough to see why a receiver
 * refused, too little to make the log a way to read what a URL serves.
 */
export const RESPONSE_BODY_LIMIT = 1024;
export const DEFAULT_TIMEOUT_MS = 15_000;
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

class TimeoutError extends Error {
  readonly code = "ETIMEDOUT_WEBHOOK";
}

const DNS_CODES = new Set([
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "ENODATA",
  "ESERVFAIL",
  "ETIMEOUT",
]);

/** Which outcome an error (from the socket, TLS or our lookup) is. */
export function classifyError(error: unknown): Outcome {
  if (error instanceof TimeoutError) return "timeout";
  if (error instanceof BlockedAddressError) return "blocked_address";
  const e = error as (NodeJS.ErrnoException & { library?: string; reason?: string }) | undefined;
  const code = e?.code ?? "";
  if (e?.name === "DnsError" || DNS_CODES.has(code) || e?.syscall === "getaddrinfo") return "dns";
  if (
    code.startsWith("ERR_TLS_") ||
    code.startsWith("ERR_SSL_") ||
    code.startsWith("CERT_") ||
    code.includes("_CERT") ||
    code.includes("SELF_SIGNED") ||
    code === "UNABLE_TO_VERIFY_LEAF_SIGNATURE" ||
    code === "UNABLE_TO_GET_ISSUER_CERT_LOCALLY" ||
    e?.library === "SSL routines" ||
    (code === "EPROTO" && /ssl|tls/i.test(e?.message ?? ""))
  ) {
    return "tls";
  }
  if (code === "ETIMEDOUT") return "timeout";
  return "connection";
}

/** Retry-After (delta seconds or an HTTP date) in milliseconds from `nowMs`, capped at 24 h; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text)) {
    ms = Number(text) * 1000;
  } else {
    // An HTTP date names its day or month ("Sun, 22 Nov 2026 11:00:00 GMT"); "-5" is not one.
    if (!/[A-Za-z]{3}/.test(text)) return undefined;
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    ms = at - nowMs;
  }
  if (!Number.isFinite(ms)) return MAX_RETRY_AFTER_MS;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
}

function describeError(error: unknown, outcome: Outcome, timeoutMs: number): string {
  if (outcome === "timeout") return `no complete answer within ${timeoutMs} ms`;
  const e = error as NodeJS.ErrnoException | undefined;
  const message = e?.message ?? String(error);
  const code = e?.code && !message.includes(e.code) ? ` (${e.code})` : "";
  return `${message}${code}`.slice(0, 2000);
}

/**
 * Sends webhooks. One per dispatcher: it holds the keep-alive connection pools; `close()` ends
 * them. A pooled connection was checked when it was made; every new one is checked again.
 */
export class WebhookSender {
  private readonly allowPrivate: boolean;
  private readonly timeoutMs: number;
  private readonly lookup: ReturnType<typeof guardedLookup>;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(options: SenderOptions) {
    this.allowPrivate = options.allowPrivate;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.lookup = guardedLookup({ allowPrivate: options.allowPrivate, lookup: options.lookup });
    const agentOptions = {
      keepAlive: true,
      maxSockets: options.maxSocketsPerHost ?? 64,
      maxFreeSockets: options.maxSocketsPerHost ?? 64,
      // Idle connections go after a few seconds: receivers close theirs after about 5 s.
      timeout: 4000,
      scheduling: "lifo" as const,
    };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
  }

  /** POSTs `body` with `headers` (the signature headers) to `url`. Never throws. */
  send(url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failure = (outcome: Outcome, error: string): SendResult => ({
      outcome,
      durationMs: elapsed(),
      error,
    });

    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return Promise.resolve(failure("connection", "the endpoint URL is not valid"));
    }
    const secure = target.protocol === "https:";
    if (!secure && target.protocol !== "http:") {
      return Promise.resolve(failure("connection", `unsupported protocol ${target.protocol}`));
    }
    if (!secure && !this.allowPrivate) {
      return Promise.resolve(
        failure("blocked_address", "plain http is not allowed; webhook URLs must use https"),
      );
    }
    const hostname = bareHostname(target);
    // A socket does not call `lookup` for an IP literal: check it here.
    if (net.isIP(hostname) && !this.allowPrivate) {
      const cls = classifyAddress(hostname);
      if (cls !== "public") {
        return Promise.resolve(
          failure("blocked_address", new BlockedAddressError(hostname, hostname, cls).message),
        );
      }
    }

    return new Promise<SendResult>((resolve) => {
      let settled = false;
      let statusCode: number | undefined;
      let retryAfterMs: number | undefined;
      const chunks: Buffer[] = [];
      let received = 0;

      const finish = (result: Omit<SendResult, "durationMs">) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...result, durationMs: elapsed() });
      };

      const answered = () => {
        const responseBody = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString("utf8");
        const status = statusCode ?? 0;
        if (status >= 200 && status < 300) {
          finish({ outcome: "ok", statusCode: status, responseBody });
        } else if (status >= 300 && status < 400) {
          const location = response?.headers.location;
          finish({
            outcome: "redirect",
            statusCode: status,
            responseBody,
            error: `redirects are not followed (${status}${location ? ` to ${String(location).slice(0, 1000)}` : ""})`,
          });
        } else {
          finish({
            outcome: "http_status",
            statusCode: status,
            responseBody,
            error: `HTTP ${status}`,
            ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
          });
        }
      };

      let response: http.IncomingMessage | undefined;
      const request = (secure ? https : http).request(
        {
          protocol: target.protocol,
          hostname,
          port: target.port || undefined,
          path: `${target.pathname}${target.search}`,
          method: "POST",
          agent: secure ? this.httpsAgent : this.httpAgent,
          lookup: this.lookup as unknown as net.LookupFunction,
          // The name the certificate is checked against, also when the host is pinned to an address.
          ...(secure && !net.isIP(hostname) ? { servername: hostname } : {}),
          headers: {
            ...headers,
            "content-type": "application/json",
            "content-length": String(Buffer.byteLength(body)),
            "user-agent": USER_AGENT,
          },
        },
        (res) => {
          response = res;
          statusCode = res.statusCode;
          if (statusCode === 429 || statusCode === 503) {
            const header = res.headers["retry-after"];
            retryAfterMs = parseRetryAfter(Array.isArray(header) ? header[0] : header);
          }
          res.on("data", (chunk: Buffer) => {
            if (received < RESPONSE_BODY_LIMIT) chunks.push(chunk);
            received += chunk.length;
            if (received > RESPONSE_BODY_LIMIT) {
              // Enough for the log: the rest is not read, and the connection is not reused.
              answered();
              res.destroy();
            }
          });
          res.on("end", answered);
          res.on("error", () => answered());
          res.on("close", () => answered());
        },
      );

      const timer = setTimeout(() => {
        if (statusCode !== undefined) {
          // The answer came but its body is slow: what was read is enough.
          answered();
          request.destroy();
          return;
        }
        const error = new TimeoutError("timeout");
        request.destroy(error);
        finish({ outcome: "timeout", error: describeError(error, "timeout", this.timeoutMs) });
      }, this.timeoutMs);

      request.on("error", (error) => {
        if (statusCode !== undefined) {
          answered();
          return;
        }
        const outcome = classifyError(error);
        finish({ outcome, error: describeError(error, outcome, this.timeoutMs) });
      });
      request.end(body);
    });
  }

  /** Closes the pooled connections. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
