import assert from "node:assert/strict";
import http from "node:http";
import { after, test } from "node:test";
import pino from "pino";
import { PROXY_CHAIN_WARNING } from "../src/http/trust-proxy.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { type ForwardingProxy, startForwardingProxy } from "./support/forwarding-proxy.ts";

/**
 * Issue 37, item 1: behind proxies that append the address they saw to X-Forwarded-For, the
 * client address (request.ip: per-address rate limits, the audit log) is the one the farthest
 * trusted proxy appended, never an entry the client wrote. Real HTTP over sockets: clients connect
 * from loopback addresses of their own (127.0.0.x), the proxies (test/support/forwarding-proxy.ts)
 * from 127.0.1.x and ::1, so the server can tell who is who. Each client forges what the finding
 * forged: `X-Forwarded-For: 203.0.113.<n>, 198.51.100.7`, with a new <n> every time.
 */

/** Each limit under test, lowered for speed; windows of a day, so none ends during the test. */
const LIMIT = 3;
const DAY = 86_400;
const RATE_LIMITS = {
  signin_per_ip: { max: LIMIT, windowSeconds: DAY },
  // Out of the way: the per-address limit is the one that must hold.
  signin_per_email_ip: { max: 1000, windowSeconds: DAY },
  signin_per_email: { max: 1000, windowSeconds: DAY },
  verify_per_ip: { max: LIMIT, windowSeconds: DAY },
};

interface Answer {
  status: number;
  body: { error_code?: string };
}

/** One request on a connection of its own, from the local address `from`. */
function send(
  base: string,
  path: string,
  options: { from: string; headers?: Record<string, string>; body?: unknown },
): Promise<Answer> {
  const url = new URL(path, base);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method: payload === undefined ? "GET" : "POST",
        localAddress: options.from,
        agent: false,
        headers: {
          ...(payload === undefined ? {} : { "content-type": "application/json" }),
          ...options.headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {} }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

let forged = 0;
/** The finding's header: a new first entry each time, the same last one. */
const forgedHeader = () => ({ "x-forwarded-for": `203.0.113.${(forged++ % 250) + 1}, 198.51.100.7` });

describeEachEngine("trusted proxies: the client address is what the proxies saw", (t) => {
  const running: { close(): Promise<void> }[] = [];
  after(async () => {
    for (const r of running.reverse()) await r.close();
  });

  async function serve(TRUST_PROXY: string, logger?: pino.Logger): Promise<RunningApp> {
    const app = await startApp(t(), { TRUST_PROXY }, logger ? { logger } : {});
    running.push(app);
    return app;
  }
  async function proxy(upstream: string, options: { host?: string; via?: string }): Promise<ForwardingProxy> {
    const p = await startForwardingProxy(upstream, options);
    running.push(p);
    return p;
  }
  /** client → proxy (which connects on from 127.0.1.1) → server: the URL clients call. */
  async function oneHop(app: RunningApp): Promise<string> {
    return (await proxy(app.url, { via: "127.0.1.1" })).url;
  }
  /** client → edge proxy (which connects on over ::1) → inner proxy (on ::1, which connects from 127.0.1.2) → server. */
  async function twoHops(app: RunningApp): Promise<string> {
    const inner = await proxy(app.url, { host: "::1", via: "127.0.1.2" });
    return (await proxy(inner.url, {})).url;
  }

  /** A tenant of its own (so no other case's counts reach it) with the lowered limits. */
  async function anonKey(): Promise<string> {
    const { keys } = await tenantWithKeys(t(), { auth: { rate_limits: RATE_LIMITS } });
    return keys.anon_key;
  }

  const signIn = (entry: string, key: string, from: string, headers: Record<string, string> = {}) =>
    send(entry, "/auth/v1/token?grant_type=password", {
      from,
      headers: { apikey: key, ...headers },
      body: { email: "nobody@example.com", password: "Wrong-Guess-1" },
    });
  const verify = (entry: string, key: string, from: string, headers: Record<string, string> = {}) =>
    send(entry, "/auth/v1/verify", {
      from,
      headers: { apikey: key, ...headers },
      body: { type: "email", email: "nobody@example.com", token: "000000" },
    });

  /**
   * `LIMIT` wrong passwords and `LIMIT` wrong codes from the client at `from`, each with a forged
   * header of its own, are answered; the next of each is 429. `other`, a second client on the same
   * path, is answered still: the count was the first client's address, not the proxy's or anyone's.
   */
  async function limitedByRealAddress(entry: string, from: string, other: string) {
    for (const [attempt, wrong] of [
      [signIn, [400, "invalid_credentials"]],
      [verify, [403, "otp_expired"]],
    ] as const) {
      const key = await anonKey();
      for (let i = 0; i < LIMIT; i++) {
        const answer = await attempt(entry, key, from, forgedHeader());
        assert.deepEqual([answer.status, answer.body.error_code], wrong, `attempt ${i + 1}`);
      }
      const refused = await attempt(entry, key, from, forgedHeader());
      assert.equal(refused.status, 429, "the real address is limited, whatever the first entries say");
      assert.equal(refused.body.error_code, "over_request_rate_limit");
      assert.equal((await attempt(entry, key, other, forgedHeader())).status, wrong[0], "another client");
    }
  }

  test("one proxy, TRUST_PROXY=true: the address the proxy appended counts, forged entries do not", async () => {
    await limitedByRealAddress(await oneHop(await serve("true")), "127.0.0.11", "127.0.0.12");
  });

  test("one proxy, TRUST_PROXY=1: the same", async () => {
    await limitedByRealAddress(await oneHop(await serve("1")), "127.0.0.13", "127.0.0.14");
  });

  test("two proxies, TRUST_PROXY=2: the address the farther proxy appended counts", async () => {
    await limitedByRealAddress(await twoHops(await serve("2")), "127.0.0.15", "127.0.0.16");
  });

  test("two proxies, TRUST_PROXY as their addresses (an IPv4 range and an IPv6 address)", async () => {
    await limitedByRealAddress(await twoHops(await serve("127.0.1.0/24, ::1")), "127.0.0.17", "127.0.0.18");
  });

  test("TRUST_PROXY=2 behind one proxy trusts the client's own last entry: a count must match the proxies", async () => {
    // What a hop count promises is checked by nobody: with one proxy fewer than it says, the
    // entry before the proxy's is the client's writing, and the finding's attack works again.
    const entry = await oneHop(await serve("2"));
    const key = await anonKey();
    for (let i = 0; i <= LIMIT; i++) {
      const answer = await signIn(entry, key, "127.0.0.19", { "x-forwarded-for": `198.51.100.${i + 1}` });
      assert.equal(answer.status, 400, `attempt ${i + 1}`);
    }
  });

  test("no proxy, TRUST_PROXY=true: the finding's header counts as its last entry, which the client wrote", async () => {
    // With nobody in front, the nearest "proxy" is the client: the last entry is its own writing.
    // Rotating the first entries (the finding) gains nothing, but a client free to connect
    // directly could rotate the last one: TRUST_PROXY is only for a server that every request
    // reaches through the proxy (docs/security.md, "Behind a proxy").
    const app = await serve("true");
    const key = await anonKey();
    for (let i = 0; i < LIMIT; i++)
      assert.equal((await signIn(app.url, key, "127.0.0.20", forgedHeader())).status, 400);
    assert.equal((await signIn(app.url, key, "127.0.0.20", forgedHeader())).status, 429);
    // Another socket with the same last entry shares its count; a different last entry does not.
    assert.equal((await signIn(app.url, key, "127.0.0.21", forgedHeader())).status, 429);
    const own = { "x-forwarded-for": "203.0.113.1, 198.51.100.8" };
    assert.equal((await signIn(app.url, key, "127.0.0.20", own)).status, 400);
  });

  test("TRUST_PROXY=false: X-Forwarded-For is ignored, the socket's address counts", async () => {
    const app = await serve("false");
    for (const attempt of [signIn, verify]) {
      const key = await anonKey();
      const rotating = () => ({
        "x-forwarded-for": `203.0.113.${(forged++ % 250) + 1}, 198.51.100.${forged % 250}`,
      });
      for (let i = 0; i < LIMIT; i++)
        assert.notEqual((await attempt(app.url, key, "127.0.0.22", rotating())).status, 429);
      assert.equal((await attempt(app.url, key, "127.0.0.22", rotating())).status, 429);
      assert.notEqual((await attempt(app.url, key, "127.0.0.23", rotating())).status, 429, "another socket");
    }
    // Behind a proxy, every client is the proxy: one client's wrong guesses lock out the next.
    const entry = await oneHop(app);
    const key = await anonKey();
    for (let i = 0; i < LIMIT; i++) assert.equal((await signIn(entry, key, "127.0.0.24")).status, 400);
    assert.equal((await signIn(entry, key, "127.0.0.25")).status, 429, "another client, the same proxy");
  });

  test("TRUST_PROXY=true warns once, at warn level, when X-Forwarded-For names more than one address", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const entry = await oneHop(await serve("true", logger));
    const warnings = () =>
      lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === PROXY_CHAIN_WARNING);
    // One proxy and a client that writes no header: one entry, nothing to say.
    for (let i = 0; i < 3; i++)
      assert.equal((await send(entry, "/health", { from: "127.0.0.26" })).status, 200);
    assert.deepEqual(warnings(), []);
    // A client writing the header (or a second proxy): said once, however often it happens.
    for (let i = 0; i < 3; i++) {
      const answer = await send(entry, "/health", { from: "127.0.0.26", headers: forgedHeader() });
      assert.equal(answer.status, 200);
    }
    const said = warnings();
    assert.equal(said.length, 1, lines.join(""));
    assert.equal(said[0]?.level, 40);
    assert.equal(said[0]?.x_forwarded_for_entries, 3);
    assert.match(PROXY_CHAIN_WARNING, /Set TRUST_PROXY to the number of proxies/);
    // An explicit count or list is the operator's choice: no warning.
    for (const setting of ["1", "2", "127.0.1.1"]) {
      lines.length = 0;
      const quiet = await oneHop(await serve(setting, logger));
      assert.equal(
        (await send(quiet, "/health", { from: "127.0.0.26", headers: forgedHeader() })).status,
        200,
      );
      assert.deepEqual(warnings(), [], setting);
    }
  });
});
