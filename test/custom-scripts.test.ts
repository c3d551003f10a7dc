import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { request as httpRequest } from "node:http";
import path from "node:path";
import { after, before, test } from "node:test";
import { DEFAULT_PORTAL_DIR } from "../src/console/static.ts";
import { setPortalDomains } from "../src/portal/domains.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedStaffUser, userToken } from "./support/seed.ts";

/**
 * A tenant's own portal scripts (docs/operator.md, "Custom scripts on the portal"): managed by
 * that tenant's admins through /admin/v1/custom-scripts over real HTTP, refused when they are not
 * https origins without wildcards, invisible to another tenant, audited, and loaded by that
 * tenant's portal page only at the tenant's own domain, with exactly their origins added to its
 * Content-Security-Policy — never on PUBLIC_URL's host, one origin with the console and every
 * other tenant's portal (whose sessions its localStorage holds).
 */

type Json = Record<string, unknown>;
type Problem = { status: number; code: string; param?: string; errors?: { param: string }[] };

const PORTAL_BUILT = existsSync(path.join(DEFAULT_PORTAL_DIR, "index.html"));

/** The directives of a Content-Security-Policy header. */
function directives(csp: string | null): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const part of (csp ?? "").split(";")) {
    const [name, ...values] = part.trim().split(/\s+/);
    if (name) out[name] = values;
  }
  return out;
}

describeEachEngine("custom scripts", (t) => {
  let running: RunningApp;
  let a: { tenant: Tenant; keys: TenantKeys };
  let b: { tenant: Tenant; keys: TenantKeys };
  before(async () => {
    running = await startApp(t());
    a = await tenantWithKeys(t());
    b = await tenantWithKeys(t());
  });
  after(() => running.close());

  type Who = { serviceKey: string } | { anonKey: string; token: string };
  const A = (): Who => ({ serviceKey: a.keys.service_role_key });
  const B = (): Who => ({ serviceKey: b.keys.service_role_key });

  async function call(who: Who, method: string, url: string, body?: unknown) {
    const headers: Record<string, string> =
      "serviceKey" in who
        ? { apikey: who.serviceKey }
        : { apikey: who.anonKey, authorization: `Bearer ${who.token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${running.url}/admin/v1${url}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  }
  const listOf = async (who: Who) =>
    ((await call(who, "GET", "/custom-scripts")).body.data as Json[]).map((s) => s.name);

  test("a tenant admin adds, reads, changes and removes a script; each change is in the audit log", async () => {
    const made = await call(A(), "POST", "/custom-scripts", {
      name: "Analytics",
      src: "https://stats.example.com/js/script.js",
    });
    assert.equal(made.status, 201);
    assert.deepEqual(
      { ...made.body, id: undefined, created_at: undefined, updated_at: undefined },
      {
        id: undefined,
        object: "custom_script",
        name: "Analytics",
        src: "https://stats.example.com/js/script.js",
        origin: "https://stats.example.com",
        placement: "head",
        connect_origins: [],
        integrity: null,
        enabled: false,
        created_at: undefined,
        updated_at: undefined,
      },
      "off unless said",
    );
    const id = made.body.id as string;
    assert.deepEqual(await listOf(A()), ["Analytics"]);
    assert.equal((await call(A(), "GET", `/custom-scripts/${id}`)).body.name, "Analytics");

    const sri = `sha384-${Buffer.alloc(48, 7).toString("base64")}`;
    const changed = await call(A(), "PATCH", `/custom-scripts/${id}`, {
      enabled: true,
      placement: "body_end",
      connect_origins: ["https://collect.example.com/", "https://collect.example.com"],
      integrity: sri,
    });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.enabled, true);
    assert.equal(changed.body.placement, "body_end");
    assert.deepEqual(changed.body.connect_origins, ["https://collect.example.com"], "normalised, once");
    assert.equal(changed.body.integrity, sri);
    assert.equal(changed.body.name, "Analytics", "what was not sent stays");

    const gone = await call(A(), "DELETE", `/custom-scripts/${id}`);
    assert.deepEqual(gone, { status: 200, body: { id, object: "custom_script", deleted: true } });
    assert.equal((await call(A(), "GET", `/custom-scripts/${id}`)).status, 404);
    assert.deepEqual(await listOf(A()), []);

    const audit = await call(A(), "GET", `/audit?object=${id}&object_table=internal.custom_scripts`);
    assert.equal(audit.status, 200);
    assert.deepEqual(
      (audit.body.data as Json[]).map((e) => e.action),
      ["delete", "update", "insert"],
      "newest first",
    );
  });

  test("refusals: malformed is 400, not https or wildcards 422 with every field named, a duplicate 409; nothing changes", async () => {
    const kept = await call(A(), "POST", "/custom-scripts", {
      name: "Chat",
      src: "https://chat.example.net/widget.js",
    });
    assert.equal(kept.status, 201);
    const before = JSON.stringify((await call(A(), "GET", "/custom-scripts")).body);

    const missing = await call(A(), "POST", "/custom-scripts", {
      src: "https://x.example.com/a.js",
      extra: 1,
    });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, "invalid_request");
    assert.deepEqual(((missing.body as Problem).errors ?? []).map((e) => e.param).sort(), ["extra", "name"]);

    const cases: [Json, string[]][] = [
      [{ src: "http://cdn.example.com/a.js" }, ["src"]],
      [{ src: "https://*.example.com/a.js" }, ["src"]],
      [{ src: "https://user:pw@cdn.example.com/a.js" }, ["src"]],
      [{ src: "https://10.0.0.1/a.js" }, ["src"]],
      [{ src: "javascript:alert(1)" }, ["src"]],
      [{ src: "not a url" }, ["src"]],
      [
        {
          src: "https://cdn.example.com/a.js",
          connect_origins: [
            "https://ok.example.com",
            "https://api.example.com/path",
            "https://*.example.com",
          ],
        },
        ["connect_origins[1]", "connect_origins[2]"],
      ],
      [
        { src: "ftp://cdn.example.com/a.js", connect_origins: ["http://api.example.com"] },
        ["src", "connect_origins[0]"],
      ],
    ];
    for (const [body, params] of cases) {
      const r = await call(A(), "POST", "/custom-scripts", { name: "Bad", ...body });
      assert.equal(r.status, 422, JSON.stringify(body));
      assert.equal(r.body.code, "invalid_script");
      assert.deepEqual(
        ((r.body as Problem).errors ?? []).map((e) => e.param),
        params,
        JSON.stringify(body),
      );
    }
    const badSri = await call(A(), "POST", "/custom-scripts", {
      name: "Bad",
      src: "https://cdn.example.com/a.js",
      integrity: "md5-abc",
    });
    assert.equal(badSri.status, 400);
    assert.equal(badSri.body.param, "integrity");
    const tooMany = await call(A(), "POST", "/custom-scripts", {
      name: "Bad",
      src: "https://cdn.example.com/a.js",
      connect_origins: Array.from({ length: 11 }, (_, i) => `https://o${i}.example.com`),
    });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.param, "connect_origins");
    const dup = await call(A(), "POST", "/custom-scripts", {
      name: "Chat",
      src: "https://cdn.example.com/a.js",
    });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.param, "name");
    const badPatch = await call(A(), "PATCH", `/custom-scripts/${kept.body.id}`, {
      src: "http://evil.example.com/x.js",
      enabled: true,
    });
    assert.equal(badPatch.status, 422);
    const emptyPatch = await call(A(), "PATCH", `/custom-scripts/${kept.body.id}`, {});
    assert.equal(emptyPatch.status, 400);

    assert.equal(JSON.stringify((await call(A(), "GET", "/custom-scripts")).body), before, "nothing changed");
    await call(A(), "DELETE", `/custom-scripts/${kept.body.id}`);
  });

  test("another tenant's admin neither sees nor changes them; a reviewer of the tenant may not manage them", async () => {
    const mine = await call(A(), "POST", "/custom-scripts", {
      name: "Mine",
      src: "https://mine.example.com/s.js",
      enabled: true,
    });
    const id = mine.body.id as string;
    assert.deepEqual(await listOf(B()), []);
    assert.equal((await call(B(), "GET", `/custom-scripts/${id}`)).status, 404);
    assert.equal((await call(B(), "PATCH", `/custom-scripts/${id}`, { enabled: false })).status, 404);
    assert.equal((await call(B(), "DELETE", `/custom-scripts/${id}`)).status, 404);

    // B's admin (a staff user) naming tenant A: not staff there.
    const bAdmin = await seedStaffUser(t().db, b.tenant, [{ of: b.tenant, role: "admin" }]);
    const bToken = await userToken(t().db, b.tenant, bAdmin, `${running.url}/auth/v1`);
    const r = await fetch(`${running.url}/admin/v1/custom-scripts`, {
      headers: { apikey: b.keys.anon_key, authorization: `Bearer ${bToken}`, "backline-tenant": a.tenant.id },
    });
    assert.equal(r.status, 403);
    assert.equal(((await r.json()) as Json).code, "not_staff");

    const reviewer = await seedStaffUser(t().db, a.tenant, [{ of: a.tenant, role: "reviewer" }]);
    const rw: Who = {
      anonKey: a.keys.anon_key,
      token: await userToken(t().db, a.tenant, reviewer, `${running.url}/auth/v1`),
    };
    const refused = await call(rw, "POST", "/custom-scripts", {
      name: "R",
      src: "https://r.example.com/r.js",
    });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, "insufficient_role");
    assert.equal((await call(rw, "GET", "/custom-scripts")).status, 403);

    // A's admin (a staff user) manages A's.
    const admin = await seedStaffUser(t().db, a.tenant, [{ of: a.tenant, role: "admin" }]);
    const aw: Who = {
      anonKey: a.keys.anon_key,
      token: await userToken(t().db, a.tenant, admin, `${running.url}/auth/v1`),
    };
    assert.deepEqual(await listOf(aw), ["Mine"]);
    assert.equal((await call(aw, "PATCH", `/custom-scripts/${id}`, { name: "Mine, renamed" })).status, 200);
    await call(A(), "DELETE", `/custom-scripts/${id}`);
  });

  /** A portal page as the browser asks for it at `host` (fetch sends its own Host; node:http does not). */
  function getPage(
    pathname: string,
    host?: string,
  ): Promise<{ status: number; csp: string; html: string; location: string }> {
    const url = new URL(pathname, running.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { headers: host ? { host: `${host}:${url.port}` } : {} }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            csp: String(res.headers["content-security-policy"] ?? ""),
            location: String(res.headers.location ?? ""),
            html: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  }

  test("tenant A's scripts load on A's own domain only, with exactly their origins in the CSP; never on PUBLIC_URL's shared host or B's domain", async (c) => {
    if (!PORTAL_BUILT) return c.skip("the portal is not built (npm run build:console)");
    const aHost = `music.${a.tenant.slug}.test`;
    const bHost = `music.${b.tenant.slug}.test`;
    await setPortalDomains(t().db, a.tenant.id, [aHost], "http:");
    await setPortalDomains(t().db, b.tenant.id, [bHost], "http:");
    const on = await call(A(), "POST", "/custom-scripts", {
      name: "Stats",
      src: "https://stats.example.com/js/script.js?site=a&v=1",
      connect_origins: ["https://collect.example.com"],
      enabled: true,
    });
    const widget = await call(A(), "POST", "/custom-scripts", {
      name: "Widget",
      src: "https://widget.example.org/w.js",
      placement: "body_end",
      enabled: true,
    });
    const off = await call(A(), "POST", "/custom-scripts", {
      name: "Off",
      src: "https://off.example.net/off.js",
    });
    assert.deepEqual([on.status, widget.status, off.status], [201, 201, 201]);
    const NAMED = ["stats.example.com", "widget.example.org", "collect.example.com", "off.example.net"];

    // A's own domain: A's enabled scripts, and exactly their origins added to the policy.
    const page = await getPage("/portal/releases", aHost);
    assert.equal(page.status, 200);
    const html = page.html;
    assert.match(html, /"via":"domain"/, "the page is A's, found by its host name");
    assert.match(
      html,
      /<script src="https:\/\/stats\.example\.com\/js\/script\.js\?site=a&amp;v=1" async><\/script><\/head>/,
    );
    assert.match(html, /<script src="https:\/\/widget\.example\.org\/w\.js"><\/script><\/body>/);
    assert.equal(html.includes("off.example.net"), false, "a disabled script is not on the page");
    const csp = directives(page.csp);
    assert.deepEqual(csp["script-src"], [
      "'self'",
      "https://stats.example.com",
      "https://widget.example.org",
    ]);
    const connect = csp["connect-src"] ?? [];
    for (const o of [
      "https://stats.example.com",
      "https://collect.example.com",
      "https://widget.example.org",
    ]) {
      assert.ok(connect.includes(o), `connect-src allows ${o}`);
    }
    assert.equal(connect.includes("https://off.example.net"), false);
    assert.deepEqual(csp["default-src"], ["'self'"]);
    assert.deepEqual(csp["object-src"], ["'none'"]);

    // PUBLIC_URL's host: one origin with the console and every tenant's portal, so A's page there
    // (and the development path) runs none of A's scripts and keeps the portal's own policy.
    const shared = [
      await getPage(`/portal/t/${a.tenant.slug}/releases`),
      await getPage(`/portal/t/${a.tenant.slug}/`),
      await getPage(`/portal/t/${a.tenant.slug}/releases`, new URL(running.url).hostname),
    ];
    for (const p of shared) {
      assert.equal(p.status, 200);
      assert.match(p.html, new RegExp(`"id":"${a.tenant.id}"`), "it is A's portal");
      for (const host of NAMED) {
        assert.equal(p.html.includes(host), false, `the shared host's page names no ${host}`);
        assert.equal(p.csp.includes(host), false, `the shared host's CSP names no ${host}`);
      }
      assert.deepEqual(directives(p.csp)["script-src"], ["'self'"]);
      assert.equal(p.html.match(/<script\b/g)?.length, 2, "the start data and the bundle only");
    }

    // The console is never served at A's domain (A's scripts run on that origin): it is sent to
    // PUBLIC_URL, where no tenant script runs.
    const consoleThere = await getPage("/console/releases?x=1", aHost);
    assert.equal(consoleThere.status, 308);
    assert.equal(consoleThere.location, `${running.url}/console/releases?x=1`);
    assert.equal(consoleThere.html.includes("<script"), false);

    // B's own domain and B's path: B's portal, none of A's; A's slug under B's domain is no portal.
    for (const p of [
      await getPage("/portal/", bHost),
      await getPage(`/portal/t/${b.tenant.slug}/releases`),
      await getPage(`/portal/t/${a.tenant.slug}/`, bHost),
    ]) {
      for (const host of NAMED) {
        assert.equal(p.html.includes(host), false, `B's page names no ${host}`);
        assert.equal(p.csp.includes(host), false);
      }
      assert.deepEqual(directives(p.csp)["script-src"], ["'self'"]);
    }

    // Disabled: gone from the next page load on A's domain.
    await call(A(), "PATCH", `/custom-scripts/${widget.body.id}`, { enabled: false });
    const after = await getPage("/portal/", aHost);
    assert.equal(after.html.includes("widget.example.org"), false);
    assert.deepEqual(directives(after.csp)["script-src"], ["'self'", "https://stats.example.com"]);

    // B claiming A's domain is refused; a tenant whose domain another tenant's settings name too
    // (written past the CLI) is not its own, and loads nothing.
    await assert.rejects(
      setPortalDomains(t().db, b.tenant.id, [aHost], "http:"),
      /already the portal domain/,
    );
    await t().db.asService((tx) =>
      tx.query(
        `update internal.tenants set settings = jsonb_set(settings, '{portal,domains}', $2::jsonb) where id = $1`,
        [b.tenant.id, JSON.stringify([bHost, aHost])],
      ),
    );
    const clash = await getPage("/portal/", aHost);
    assert.deepEqual(directives(clash.csp)["script-src"], ["'self'"]);
    assert.equal(clash.html.includes("stats.example.com"), false);
    await setPortalDomains(t().db, b.tenant.id, [], "http:");

    for (const s of [on, widget, off]) await call(A(), "DELETE", `/custom-scripts/${s.body.id}`);
    const none = await getPage("/portal/", aHost);
    assert.deepEqual(directives(none.csp)["script-src"], ["'self'"]);
    assert.equal(none.html.match(/<script\b/g)?.length, 2, "the start data and the bundle only");
    await setPortalDomains(t().db, a.tenant.id, [], "http:");
  });
});
