import assert from "node:assert/strict";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { classifyError, parseRetryAfter, WebhookSender } from "../src/webhooks/sender.ts";
import {
  checkWebhookUrl,
  classifyAddress,
  isBlockedAddress,
  parseV6,
  type Resolve,
} from "../src/webhooks/ssrf.ts";
import { freePort } from "./support/process.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";

/**
 * The webhooks SSRF guard (src/webhooks/ssrf.ts, docs/webhooks.md): which addresses are refused,
 * the registration check, and the check at connection time with the resolved address pinned.
 * Names are resolved by injected resolvers; nothing here sends a packet beyond 127.0.0.1 (the
 * machine's network rules forbid it): every refused name is refused before any socket opens.
 */

describe("address classification", () => {
  const table: [string, string][] = [
    ["127.0.0.1", "loopback"],
    ["127.255.1.2", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", "public"],
    ["172.15.255.255", "public"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "metadata"],
    ["169.254.1.1", "link_local"],
    ["100.64.0.1", "cgnat"],
    ["100.127.255.255", "cgnat"],
    ["100.128.0.1", "public"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.1", "reserved"],
    ["198.18.0.1", "reserved"],
    ["8.8.8.8", "public"],
    ["1.1.1.1", "public"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "link_local"],
    ["fe80::1%eth0", "link_local"],
    ["febf::1", "link_local"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["fd00:ec2::254", "metadata"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::FFFF:7F00:0001", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:8.8.8.8", "public"],
    ["::ffff:0:127.0.0.1", "loopback"],
    ["::127.0.0.1", "reserved"],
    ["64:ff9b::127.0.0.1", "loopback"],
    ["64:ff9b::808:808", "public"],
    ["2002:7f00:1::1", "loopback"],
    ["2002:0808:0808::1", "public"],
    ["2001:db8::1", "reserved"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"],
    ["fec0::1", "reserved"],
    ["100::1", "reserved"],
    ["2001:4860:4860::8888", "public"],
    ["2606:4700:4700::1111", "public"],
    ["[2606:4700:4700::1111]", "public"],
    ["not an address", "invalid"],
    ["1.2.3", "invalid"],
    ["1.2.3.256", "invalid"],
  ];
  for (const [address, expected] of table) {
    test(`${address} is ${expected}`, () => {
      assert.equal(classifyAddress(address), expected);
      assert.equal(isBlockedAddress(address), expected !== "public");
    });
  }

  test("IPv6 parsing expands every form to eight groups", () => {
    assert.deepEqual(parseV6("::"), [0, 0, 0, 0, 0, 0, 0, 0]);
    assert.deepEqual(parseV6("1::"), [1, 0, 0, 0, 0, 0, 0, 0]);
    assert.deepEqual(parseV6("::ffff:1.2.3.4"), [0, 0, 0, 0, 0, 0xffff, 0x102, 0x304]);
    assert.deepEqual(parseV6("1:2:3:4:5:6:7:8"), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(parseV6("1:2:3::6:7:8"), [1, 2, 3, 0, 0, 6, 7, 8]);
    assert.equal(parseV6("1:2:3:4:5:6:7:8:9"), undefined);
    assert.equal(parseV6("127.0.0.1"), undefined);
  });
});

/** A resolver from a table: a name maps to its addresses, a missing name does not resolve. */
function resolver(table: Record<string, string[]>, calls: string[] = []): Resolve {
  return async (hostname) => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
}

describe("checkWebhookUrl (registration)", () => {
  const calls: string[] = [];
  const lookup = resolver(
    {
      "hooks.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
      "internal.example.com": ["10.0.0.5"],
      "rebind.example.com": ["93.184.216.34", "127.0.0.1"],
      "metadata.example.com": ["169.254.169.254"],
      "v6-loopback.example.com": ["::1"],
      "mapped.example.com": ["::ffff:192.168.0.10"],
      "empty.example.com": [],
    },
    calls,
  );
  const check = (url: string, allowPrivate = false) => checkWebhookUrl(url, { allowPrivate, lookup });

  test("an https URL whose every address is public is accepted", async () => {
    assert.deepEqual(await check("https://hooks.example.com/backline?x=1"), { ok: true });
    assert.deepEqual(await check("https://hooks.example.com:8443/"), { ok: true });
    assert.deepEqual(await check("https://8.8.8.8/hook"), { ok: true });
    assert.deepEqual(await check("https://[2001:4860:4860::8888]/hook"), { ok: true });
  });

  const refused: [string, string][] = [
    ["https://internal.example.com/", "url_blocked_address"],
    ["https://rebind.example.com/", "url_blocked_address"],
    ["https://metadata.example.com/", "url_blocked_address"],
    ["https://v6-loopback.example.com/", "url_blocked_address"],
    ["https://mapped.example.com/", "url_blocked_address"],
    ["https://127.0.0.1/", "url_blocked_address"],
    ["https://0x7f.1/", "url_blocked_address"],
    ["https://2130706433/", "url_blocked_address"],
    ["https://017700000001/", "url_blocked_address"],
    ["https://[::1]:8443/", "url_blocked_address"],
    ["https://[::ffff:7f00:1]/", "url_blocked_address"],
    ["https://169.254.169.254/latest/meta-data/", "url_blocked_address"],
    ["https://[fd00:ec2::254]/", "url_blocked_address"],
    ["https://100.64.0.1/", "url_blocked_address"],
    ["https://0.0.0.0/", "url_blocked_address"],
    ["https://localhost/", "url_blocked_address"],
    ["https://api.localhost/", "url_blocked_address"],
    ["https://nowhere.example.com/", "url_unresolvable"],
    ["https://empty.example.com/", "url_unresolvable"],
    ["http://hooks.example.com/", "url_not_https"],
    ["http://127.0.0.1:3000/", "url_not_https"],
    ["not a url", "url_invalid"],
    ["", "url_invalid"],
    ["https://", "url_invalid"],
    ["ftp://hooks.example.com/", "url_invalid"],
    ["javascript:alert(1)", "url_invalid"],
    ["file:///etc/passwd", "url_invalid"],
    ["https://user:secret@hooks.example.com/", "url_invalid"],
    [`https://hooks.example.com/${"a".repeat(2048)}`, "url_invalid"],
  ];
  for (const [url, code] of refused) {
    test(`${url.slice(0, 60) || "(empty)"} is refused: ${code}`, async () => {
      const verdict = await check(url);
      assert.equal(verdict.ok, false);
      assert.equal(verdict.ok === false && verdict.code, code);
      assert.ok(verdict.ok === false && verdict.message.length > 0);
    });
  }

  test("with allowPrivate, http and local addresses are accepted; malformed URLs still are not", async () => {
    assert.deepEqual(await check("http://127.0.0.1:3000/hook", true), { ok: true });
    assert.deepEqual(await check("http://internal.example.com/", true), { ok: true });
    assert.deepEqual(await check("https://localhost:8443/", true), { ok: true });
    const garbage = await check("ftp://x/", true);
    assert.equal(garbage.ok === false && garbage.code, "url_invalid");
  });

  test("an IP literal is never looked up", async () => {
    calls.length = 0;
    await check("https://10.0.0.1/");
    await check("https://[2001:4860:4860::8888]/");
    assert.deepEqual(calls, []);
  });
});

describe("schedule helpers", () => {
  test("Retry-After: seconds or an HTTP date, at most 24 h, nothing for garbage", () => {
    const now = Date.parse("2026-11-22T09:00:00Z");
    assert.equal(parseRetryAfter("120", now), 120_000);
    assert.equal(parseRetryAfter(" 0 ", now), 0);
    assert.equal(parseRetryAfter("Sun, 22 Nov 2026 11:00:00 GMT", now), 2 * 3_600_000);
    assert.equal(parseRetryAfter("Sat, 21 Nov 2026 11:00:00 GMT", now), 0, "a date in the past: no wait");
    assert.equal(parseRetryAfter("99999999", now), 24 * 3_600_000);
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter("-5", now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
  });

  test("errors are classified by their codes", () => {
    const e = (code: string, message = code) => Object.assign(new Error(message), { code });
    assert.equal(classifyError(e("ECONNREFUSED")), "connection");
    assert.equal(classifyError(e("ECONNRESET")), "connection");
    assert.equal(classifyError(e("ENOTFOUND")), "dns");
    assert.equal(classifyError(e("EAI_AGAIN")), "dns");
    assert.equal(classifyError(e("DEPTH_ZERO_SELF_SIGNED_CERT")), "tls");
    assert.equal(classifyError(e("ERR_TLS_CERT_ALTNAME_INVALID")), "tls");
    assert.equal(classifyError(e("CERT_HAS_EXPIRED")), "tls");
    assert.equal(classifyError(e("ERR_SSL_WRONG_VERSION_NUMBER")), "tls");
  });
});

// A self-signed certificate for CN=localhost (EC P-256, valid until 2126), made for this test:
// the sender must refuse it (outcome tls). Not a secret of anything.
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgE/pdyinp770EC8SU
wo3SxLaiEUv3Rwpe6q6kN0IZWbChRANCAAQxkkX/eo4cNhgdUQrAV72YCC29F6sI
Hjc/KhORzzOGJzAfJ3+rPJ3PQG0ul8l5q33bTLIre7SZG/4mgxzlgOoF
-----END PRIVATE KEY-----
`;
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIUdi6wS0wXRCApYk05uEkQP973YlMwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMjA3MTY0NVoYDzIxMjYxMDI5
MDcxNjQ1WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQxkkX/eo4cNhgdUQrAV72YCC29F6sIHjc/KhORzzOGJzAfJ3+rPJ3P
QG0ul8l5q33bTLIre7SZG/4mgxzlgOoFo1MwUTAdBgNVHQ4EFgQU4sOFDhuupPcy
hmbZayVHweyiBBUwHwYDVR0jBBgwFoAU4sOFDhuupPcyhmbZayVHweyiBBUwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEArR2iDIR8mvz7DQZ6hbA4
glNcwkVWmwCl+kn+++WQXmwCIH/y2/ipzsTEZK5p4BH9N239pwVISa+xMmuSGPHI
t1VV
-----END CERTIFICATE-----
`;

describe("the sender at connection time", () => {
  let receiver: WebhookReceiver;
  let port: number;
  let tlsServer: https.Server;
  let tlsHits = 0;
  const senders: WebhookSender[] = [];
  const sender = (options: ConstructorParameters<typeof WebhookSender>[0]) => {
    const s = new WebhookSender({ timeoutMs: 5000, ...options });
    senders.push(s);
    return s;
  };
  const body = JSON.stringify({ id: "evt", type: "release.live" });
  const headers = { "webhook-id": "evt", "webhook-timestamp": "1", "webhook-signature": "v1,x" };

  before(async () => {
    receiver = await WebhookReceiver.start();
    port = Number(new URL(receiver.url).port);
    tlsServer = https.createServer({ key: TEST_KEY, cert: TEST_CERT }, (_req, res) => {
      tlsHits++;
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => tlsServer.listen(0, "127.0.0.1", resolve));
  });
  after(async () => {
    for (const s of senders) s.close();
    tlsServer.closeAllConnections();
    await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
    await receiver.close();
  });

  test("a name resolving to 127.0.0.1 is refused before connecting, unless private targets are allowed", async () => {
    const route = receiver.route("pinned");
    const lookup = resolver({ "hooks.example.test": ["127.0.0.1"] });
    const target = `https://hooks.example.test:${port}${route.path}`;
    const refused = await sender({ allowPrivate: false, lookup }).send(target, body, headers);
    assert.equal(refused.outcome, "blocked_address");
    assert.equal(refused.statusCode, undefined);
    assert.match(refused.error ?? "", /hooks\.example\.test resolves to 127\.0\.0\.1, a loopback address/);

    // Allowed: the socket goes to the address the resolver gave — the name exists nowhere else.
    const allowed = await sender({ allowPrivate: true, lookup }).send(
      `http://hooks.example.test:${port}${route.path}`,
      body,
      headers,
    );
    assert.equal(allowed.outcome, "ok");
    assert.equal(allowed.statusCode, 204);
    assert.equal(route.received.length, 1, "only the allowed request arrived");
    assert.equal(route.received[0]?.headers.host, `hooks.example.test:${port}`);
    assert.equal(route.received[0]?.headers["user-agent"], "Backline-Webhooks/1");
    assert.equal(route.received[0]?.headers["content-type"], "application/json");
    assert.equal(route.received[0]?.body, body);
  });

  test("a name with one public and one private address is refused: nothing is sent to either", async () => {
    const route = receiver.route("mixed");
    const lookup = resolver({ "mixed.example.test": ["8.8.8.8", "127.0.0.1"] });
    const result = await sender({ allowPrivate: false, lookup }).send(
      `https://mixed.example.test:${port}${route.path}`,
      body,
      headers,
    );
    assert.equal(result.outcome, "blocked_address");
    assert.equal(route.received.length, 0);
  });

  test("IP literals and plain http are refused without private targets", async () => {
    const route = receiver.route("literal");
    const s = sender({ allowPrivate: false, lookup: resolver({}) });
    for (const url of [
      `https://127.0.0.1:${port}${route.path}`,
      `https://[::ffff:127.0.0.1]:${port}${route.path}`,
      `https://[::1]:${port}${route.path}`,
      `http://8.8.8.8:${port}${route.path}`,
    ]) {
      const result = await s.send(url, body, headers);
      assert.equal(result.outcome, "blocked_address", url);
    }
    assert.equal(route.received.length, 0);
  });

  test("a redirect is not followed, even to an allowed address; it is outcome redirect", async () => {
    const target = receiver.route("redirect-target");
    const route = receiver.route("redirect", {
      respond: () => ({ status: 302, headers: { location: target.url }, body: "moved" }),
    });
    const result = await sender({ allowPrivate: true }).send(route.url, body, headers);
    assert.equal(result.outcome, "redirect");
    assert.equal(result.statusCode, 302);
    assert.match(
      result.error ?? "",
      new RegExp(`not followed \\(302 to ${target.url.replace(/[.]/g, "\\.")}`),
    );
    assert.equal(result.responseBody, "moved");
    assert.equal(route.received.length, 1);
    assert.equal(target.received.length, 0, "the redirect target got nothing");
  });

  test("refused connections, unresolvable names and bad certificates have their outcomes", async () => {
    const closed = await freePort();
    const s = sender({ allowPrivate: true, lookup: resolver({ "local.example.test": ["127.0.0.1"] }) });
    const refused = await s.send(`http://127.0.0.1:${closed}/`, body, headers);
    assert.equal(refused.outcome, "connection");
    assert.match(refused.error ?? "", /ECONNREFUSED/);
    const dns = await s.send("http://nowhere.example.test/", body, headers);
    assert.equal(dns.outcome, "dns");
    assert.match(dns.error ?? "", /ENOTFOUND/);
    const tlsPort = (tlsServer.address() as AddressInfo).port;
    const tls = await s.send(`https://local.example.test:${tlsPort}/`, body, headers);
    assert.equal(tls.outcome, "tls", tls.error);
    assert.equal(tlsHits, 0, "no request went over the untrusted connection");
  });

  test("a 429 and a 503 carry Retry-After; other statuses do not", async () => {
    const route = receiver.route("busy", {
      respond: (_r, n) => ({
        status: n === 1 ? 429 : n === 2 ? 503 : 500,
        headers: { "retry-after": "120" },
      }),
    });
    const s = sender({ allowPrivate: true });
    assert.deepEqual(
      [
        (await s.send(route.url, body, headers)).retryAfterMs,
        (await s.send(route.url, body, headers)).retryAfterMs,
      ],
      [120_000, 120_000],
    );
    const other = await s.send(route.url, body, headers);
    assert.equal(other.outcome, "http_status");
    assert.equal(other.retryAfterMs, undefined);
  });

  test("a slow answer is a timeout; a big one is read only to 1 KiB", async () => {
    const slow = receiver.route("slow", { respond: () => "hang" });
    const result = await sender({ allowPrivate: true, timeoutMs: 200 }).send(slow.url, body, headers);
    assert.equal(result.outcome, "timeout");
    assert.ok(result.durationMs >= 190 && result.durationMs < 2000, String(result.durationMs));
    receiver.release(slow.path);

    // A body that never ends after its first 1 KiB: not waited for.
    const endless = http.createServer((_req, res) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.write("x".repeat(3000));
    });
    await new Promise<void>((resolve) => endless.listen(0, "127.0.0.1", resolve));
    try {
      const big = await sender({ allowPrivate: true, timeoutMs: 3000 }).send(
        `http://127.0.0.1:${(endless.address() as AddressInfo).port}/`,
        body,
        headers,
      );
      assert.equal(big.outcome, "http_status");
      assert.equal(big.statusCode, 500);
      assert.equal(big.responseBody?.length, 1024);
      assert.ok(big.durationMs < 2000, String(big.durationMs));
    } finally {
      endless.closeAllConnections();
      await new Promise<void>((resolve) => endless.close(() => resolve()));
    }
  });
});
