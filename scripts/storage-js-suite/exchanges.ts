/**
 * Records what the server answered during the suite (run.ts with EXCHANGES=<file>), so that
 * compare.ts can put Backline's answers beside Storage's request by request, not only test by test:
 * one JSON line per request the tests sent to the server under test — the test that sent it, the
 * method, the path with the run's own parts made neutral (the base URL, the `Date.now()` in bucket
 * and file names, tokens), the HTTP status, for an error its body's `statusCode`, `code`, `error`
 * and `message`, and for a JSON success the names of its fields (of its first item for a list).
 */
import fs from "node:fs";
import { beforeEach } from "node:test";

export interface Exchange {
  test: string;
  method: string;
  path: string;
  status: number;
  error?: { statusCode?: unknown; code?: unknown; error?: unknown; message?: unknown };
  fields?: string;
}

let current = "(setup)";
// A hook of the root runs before every test's own hooks: their requests count as the test's.
beforeEach((t) => {
  current = t.fullName;
});

/** Neutral form of a request path: no base URL, no timestamps, no token values. */
export function neutralPath(url: string, base: string): string {
  const u = new URL(url);
  const prefix = new URL(base).pathname.replace(/\/$/, "");
  let p = u.pathname.startsWith(prefix) ? u.pathname.slice(prefix.length) : u.pathname;
  p = p.replace(/\d{13}/g, "<t>");
  const query = [...u.searchParams.keys()].map((k) => (k === "token" ? "token=…" : k)).join("&");
  return query ? `${p}?${query}` : p;
}

export function recordExchanges(file: string, base: string): void {
  fs.writeFileSync(file, "");
  const original = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    // Not `new Request(input, init)`: that would take a streamed body away from the real call.
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const method = init?.method ?? (input instanceof Request ? input.method : "GET");
    const response = await original(input, init);
    if (!url.startsWith(base)) return response;
    const exchange: Exchange = {
      test: current,
      method: method.toUpperCase(),
      path: neutralPath(url, base),
      status: response.status,
    };
    const type = response.headers.get("content-type") ?? "";
    if (type.includes("json")) {
      const body = (await response
        .clone()
        .json()
        .catch(() => undefined)) as unknown;
      const first = Array.isArray(body) ? body[0] : body;
      const object =
        typeof first === "object" && first !== null ? (first as Record<string, unknown>) : undefined;
      if (object && !Array.isArray(body) && (response.status >= 400 || "statusCode" in object)) {
        const { statusCode, code, error, message } = object;
        exchange.error = { statusCode, code, error, message };
      } else if (object) {
        exchange.fields = `${Array.isArray(body) ? "[] " : ""}${Object.keys(object).sort().join(",")}`;
      }
    }
    fs.appendFileSync(file, `${JSON.stringify(exchange)}\n`);
    return response;
  };
}
