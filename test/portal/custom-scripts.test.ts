import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";

/**
 * A tenant's own portal script (docs/operator.md, "Custom scripts on the portal") in headless
 * Chromium against `npm start`'s server: a script served from a second local port, listed and
 * enabled by the tenant's admin through /admin/v1/custom-scripts, runs on the tenant's portal at
 * its own domain (`music.moonlight.test`, mapped to loopback with --host-resolver-rules) and may
 * call its own origin; what it then tries from a third, unlisted origin (a script, a fetch) is
 * blocked by the page's Content-Security-Policy and never reaches that server. On PUBLIC_URL's
 * host — one origin with the console, whose session sits in localStorage there — the same
 * tenant's portal loads no script of the tenant at all, so nothing can read that session.
 * Disabled, the script is gone from the next page load.
 */

const DOMAIN = "music.moonlight.test";
const skip = portalSkip();

interface Origin {
  server: Server;
  url: string;
  hits: string[];
}

async function origin(body: (self: string) => Record<string, string>): Promise<Origin> {
  const hits: string[] = [];
  const out = { hits, url: "", server: undefined as unknown as Server };
  out.server = createServer((req, res) => {
    hits.push(req.url ?? "");
    const file = body(out.url)[req.url ?? ""];
    res.writeHead(file === undefined ? 404 : 200, {
      "content-type": (req.url ?? "").endsWith(".js") ? "text/javascript" : "text/plain",
      "access-control-allow-origin": "*",
      "cache-control": "no-store",
    });
    res.end(file ?? "not found");
  });
  await new Promise<void>((resolve) => out.server.listen(0, "127.0.0.1", resolve));
  out.url = `http://127.0.0.1:${(out.server.address() as AddressInfo).port}`;
  return out;
}

describe("the portal in Chromium: a tenant's custom script and its CSP", { skip }, () => {
  let listed: Origin;
  let unlisted: Origin;
  before(async () => {
    unlisted = await origin(() => ({ "/unlisted.js": "window.__unlisted = 'ran';", "/ping": "unlisted" }));
    listed = await origin((self) => ({
      "/ping": "pong",
      "/listed.js": `
        window.__violations = [];
        document.addEventListener("securitypolicyviolation", (e) => {
          window.__violations.push(e.effectiveDirective + " " + e.blockedURI);
        });
        window.__listed = "ran";
        fetch("${self}/seen?session=" + encodeURIComponent(String(localStorage.getItem("backline-console-session")))).then((r) => r.text());
        fetch("${self}/ping").then((r) => r.text()).then((t) => { window.__ping = t; }, () => { window.__ping = "blocked"; });
        fetch("${unlisted.url}/ping").then(() => { window.__unlistedPing = "reached"; }, () => { window.__unlistedPing = "blocked"; });
        const s = document.createElement("script");
        s.src = "${unlisted.url}/unlisted.js";
        s.onerror = () => { window.__unlistedScript = "blocked"; };
        document.head.append(s);
      `,
    }));
  });
  after(() => {
    listed?.server.close();
    unlisted?.server.close();
  });
  // Both other origins pass the test harness's own filter: what blocks is the page's policy.
  const stories = portalSuite(
    {},
    {
      otherOrigins: () => [listed.url, unlisted.url, own()],
      launchArgs: [`--host-resolver-rules=MAP ${DOMAIN} 127.0.0.1`],
    },
  );
  // The tenant's own domain (its portal at /portal/), on the server's port; and PUBLIC_URL's path.
  const own = () => `http://${DOMAIN}:${new URL(stories.stack.url).port}`;
  const shared = stories.portal;

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${stories.stack.url}/admin/v1${path}`, {
      method,
      headers: { apikey: stories.world.tenant.serviceKey, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
    return (await res.json()) as { id: string };
  };

  test("a listed origin's script runs and reaches its origin; an unlisted origin is blocked by the CSP", async () => {
    const script = await admin("POST", "/custom-scripts", {
      name: "Local analytics",
      src: `${listed.url}/listed.js`,
      enabled: true,
    });
    await stories.story("custom-scripts", async ({ page, record }) => {
      const response = await page.goto(`${own()}/portal/`);
      const csp = response?.headers()["content-security-policy"] ?? "";
      assert.match(csp, new RegExp(`script-src 'self' ${listed.url.replace(/[.:/]/g, "\\$&")};`));
      await page.locator(tid("page-sign-in")).waitFor();
      await page.waitForFunction(
        () => {
          const w = globalThis as unknown as Record<string, unknown>;
          return w.__ping !== undefined && w.__unlistedPing !== undefined && w.__unlistedScript !== undefined;
        },
        undefined,
        { timeout: 20_000 },
      );
      const seen = await page.evaluate(() => {
        const w = globalThis as unknown as Record<string, unknown>;
        return {
          listed: w.__listed,
          ping: w.__ping,
          unlistedPing: w.__unlistedPing,
          unlistedScript: w.__unlistedScript,
          unlisted: w.__unlisted ?? null,
          violations: w.__violations,
        };
      });
      assert.deepEqual(seen, {
        listed: "ran",
        ping: "pong",
        unlistedPing: "blocked",
        unlistedScript: "blocked",
        unlisted: null,
        violations: [
          `connect-src ${unlisted.url}/ping`,
          `script-src-elem ${unlisted.url}/unlisted.js`,
        ].sort(),
      });
      assert.deepEqual(unlisted.hits, [], "nothing reached the unlisted origin");
      assert.ok(listed.hits.includes("/listed.js"));
      // The tenant's own origin holds no console session: what the script finds is nothing.
      assert.ok(listed.hits.includes("/seen?session=null"), listed.hits.join(" "));
      await record("custom-scripts", "page-sign-in");
    });

    // PUBLIC_URL's host, where the console keeps its session: the same tenant's portal there
    // loads none of its scripts, so none reads the session (or anything else on that origin).
    const hitsBefore = listed.hits.length;
    await stories.story("custom-scripts-shared-host", async ({ page }) => {
      await page.goto(`${stories.stack.url}/console/`);
      await page.evaluate(() =>
        (
          globalThis as unknown as { localStorage: { setItem(k: string, v: string): void } }
        ).localStorage.setItem(
          "backline-console-session",
          JSON.stringify({ access_token: "staff-secret-token" }),
        ),
      );
      const response = await page.goto(`${shared()}/`);
      await page.locator(tid("page-sign-in")).waitFor();
      await page.waitForLoadState("networkidle");
      const csp = response?.headers()["content-security-policy"] ?? "";
      assert.equal(csp.includes(listed.url), false, csp);
      assert.match(csp, /script-src 'self';/);
      const seen = await page.evaluate(() => {
        const w = globalThis as unknown as Record<string, unknown> & {
          document: { querySelectorAll(s: string): { length: number } };
          localStorage: { getItem(k: string): string | null };
        };
        return {
          listed: w.__listed ?? null,
          foreign: w.document.querySelectorAll("script[src^='http']").length,
          session: w.localStorage.getItem("backline-console-session") !== null,
        };
      });
      assert.deepEqual(
        seen,
        { listed: null, foreign: 0, session: true },
        "the session is there; no tenant script is",
      );
    });
    assert.equal(
      listed.hits.length,
      hitsBefore,
      "the shared host fetched nothing from the tenant's script origin",
    );
    assert.equal(
      listed.hits.some((h) => h.includes("staff-secret-token")),
      false,
      "the console session never left",
    );

    // Disabled: the next page load has no script and the portal's own policy.
    await admin("PATCH", `/custom-scripts/${script.id}`, { enabled: false });
    const before = listed.hits.length;
    await stories.story("custom-scripts-off", async ({ page }) => {
      const response = await page.goto(`${own()}/portal/`);
      await page.locator(tid("page-sign-in")).waitFor();
      const csp = response?.headers()["content-security-policy"] ?? "";
      assert.equal(csp.includes(listed.url), false, csp);
      assert.match(csp, /script-src 'self';/);
      assert.equal(
        await page.evaluate(() => (globalThis as unknown as Record<string, unknown>).__listed ?? null),
        null,
      );
    });
    assert.equal(listed.hits.length, before, "the disabled script was not fetched");
    await admin("DELETE", `/custom-scripts/${script.id}`);
  });
});
