import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { guardedFetch, OutboundRefused } from "./outbound.ts";

/**
 * Calls to addresses a tenant chose (its identity provider's): https to public addresses only,
 * unless allowPrivate. A refused call never reaches the address; an allowed one reads the answer
 * as fetch would, capped in size.
 */
describe("guardedFetch", () => {
  let server: http.Server;
  let port = 0;
  let hits = 0;
  before(async () => {
    server = http.createServer((req, res) => {
      hits++;
      if (req.url === "/big") {
        res.end("x".repeat(4096));
        return;
      }
      let body = "";
      req.on("data", (c: Buffer) => (body += c));
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ method: req.method, body, type: req.headers["content-type"] ?? null }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const refusals: [string, RegExp][] = [
    ["http on a loopback address", /not https/],
    ["https to a loopback address", /not a public address/],
    ["https to a name that resolves to loopback", /loopback|not a public|refused|blocked/i],
    ["https to a link-local (cloud metadata) address", /not a public address/],
    ["https to a private address", /not a public address/],
  ];
  const urls = () => [
    `http://127.0.0.1:${port}/`,
    `https://127.0.0.1:${port}/`,
    `https://localhost:${port}/`,
    "https://169.254.169.254/latest/meta-data/",
    "https://10.1.2.3/",
  ];

  test("refuses what is not https to a public address, and the address hears nothing", async () => {
    const fetch = guardedFetch({ allowPrivate: false });
    const before = hits;
    const list = urls();
    for (const [i, [what, message]] of refusals.entries()) {
      await assert.rejects(fetch(list[i] as string), (error: Error) => {
        assert.match(error.message, message, what);
        return true;
      });
    }
    assert.equal(hits, before);
    await assert.rejects(fetch("not a url"), OutboundRefused);
  });

  test("with allowPrivate a local provider is reached: GET, a form POST, the answer as a Response", async () => {
    const fetch = guardedFetch({ allowPrivate: true });
    const got = await fetch(`http://127.0.0.1:${port}/x`, { headers: { accept: "application/json" } });
    assert.equal(got.status, 200);
    assert.deepEqual(await got.json(), { method: "GET", body: "", type: null });
    const posted = await fetch(`http://localhost:${port}/token`, {
      method: "POST",
      body: new URLSearchParams({ grant_type: "authorization_code", code: "c" }),
    });
    assert.deepEqual(await posted.json(), {
      method: "POST",
      body: "grant_type=authorization_code&code=c",
      type: "application/x-www-form-urlencoded",
    });
  });

  test("an answer larger than the cap is refused", async () => {
    const fetch = guardedFetch({ allowPrivate: true, maxBytes: 1024 });
    await assert.rejects(fetch(`http://127.0.0.1:${port}/big`), /larger than 1024 bytes/);
  });
});
