import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import sharp from "sharp";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedStaffUser, userToken } from "./support/seed.ts";

/**
 * A tenant's logo uploaded through POST /admin/v1/settings/logo and its custom CSS through PATCH
 * /admin/v1/settings (docs/portal.md, "Branding"): served at /brand/<tenant>/…, named by the
 * portal's tenant file, refused to other roles, and bad files refused without changing anything.
 */

const png = (width: number, height: number, format: "png" | "jpeg" | "webp" = "png") =>
  sharp({ create: { width, height, channels: 3, background: "#d1495b" } })
    .toFormat(format)
    .toBuffer();

describeEachEngine("brand assets", (t) => {
  let running: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let other: { tenant: Tenant; keys: TenantKeys };
  before(async () => {
    running = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t()));
    other = await tenantWithKeys(t());
  });
  after(() => running.close());

  const upload = (body: Buffer | string, contentType: string, headers: Record<string, string> = {}) =>
    fetch(`${running.url}/admin/v1/settings/logo`, {
      method: "POST",
      headers: { apikey: keys.service_role_key, "content-type": contentType, ...headers },
      body,
    });
  const logoUrl = async (tenantId = tenant.id) =>
    (
      await t().db.asService((tx) =>
        tx.query<{ logo_url: string | null }>(
          "select logo_url from internal.organization_settings where tenant_id = $1",
          [tenantId],
        ),
      )
    ).rows[0]?.logo_url ?? null;
  const portalTenant = async (slug: string) =>
    (await (await fetch(`${running.url}/portal/tenant.json?slug=${slug}`)).json()) as {
      branding: { logo_url: string | null; custom_css_url: string | null };
    };

  test("an uploaded PNG is served at /brand/<tenant>/logo, and logo_url names it everywhere", async () => {
    const bytes = await png(240, 80);
    const res = await upload(bytes, "image/png");
    assert.equal(res.status, 200);
    const settings = (await res.json()) as { branding: { logo_url: string } };
    assert.match(
      settings.branding.logo_url,
      new RegExp(`^${running.url}/brand/${tenant.id}/logo\\?v=[0-9a-f]{12}$`),
    );
    assert.equal(await logoUrl(), settings.branding.logo_url);
    assert.equal((await portalTenant(tenant.slug)).branding.logo_url, settings.branding.logo_url);

    const served = await fetch(settings.branding.logo_url);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get("content-type"), "image/png");
    assert.equal(served.headers.get("x-content-type-options"), "nosniff");
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), bytes);
    const etag = served.headers.get("etag") ?? "";
    const again = await fetch(settings.branding.logo_url, { headers: { "if-none-match": etag } });
    assert.equal(again.status, 304);

    // A JPEG sent as image/png is taken for what its bytes are.
    const jpeg = await png(64, 64, "jpeg");
    const replaced = (await (await upload(jpeg, "image/png")).json()) as { branding: { logo_url: string } };
    assert.notEqual(
      replaced.branding.logo_url,
      settings.branding.logo_url,
      "a new digest: browsers fetch it again",
    );
    assert.equal((await fetch(replaced.branding.logo_url)).headers.get("content-type"), "image/jpeg");

    // A logo_url of another address replaces the uploaded file, which is then gone.
    const patched = await fetch(`${running.url}/admin/v1/settings`, {
      method: "PATCH",
      headers: { apikey: keys.service_role_key, "content-type": "application/json" },
      body: JSON.stringify({ branding: { logo_url: "https://cdn.example.com/logo.png" } }),
    });
    assert.equal(patched.status, 200);
    assert.equal((await fetch(`${running.url}/brand/${tenant.id}/logo`)).status, 404);
  });

  const refusals: [string, () => Promise<Buffer | string>, string, number, string][] = [
    [
      "an SVG (it can carry script)",
      async () => '<svg xmlns="http://www.w3.org/2000/svg"/>',
      "image/svg+xml",
      415,
      "logo_format",
    ],
    [
      "bytes that are no image",
      async () => Buffer.from("not an image at all"),
      "image/png",
      422,
      "logo_unreadable",
    ],
    [
      "a GIF",
      async () =>
        sharp({ create: { width: 32, height: 32, channels: 3, background: "#000" } })
          .gif()
          .toBuffer(),
      "image/gif",
      415,
      "logo_format",
    ],
    ["an image 8 pixels high", () => png(200, 8), "image/png", 422, "logo_dimensions"],
    ["an empty body", async () => Buffer.alloc(0), "image/png", 400, "invalid_request"],
    ["JSON instead of an image", async () => "{}", "application/json", 415, "unsupported_media_type"],
    ["more than 1 MiB", async () => Buffer.alloc(1024 * 1024 + 1, 1), "image/png", 413, ""],
  ];
  for (const [what, body, type, status, code] of refusals) {
    test(`refused, changing nothing: ${what} (${status}${code ? ` ${code}` : ""})`, async () => {
      const before = await logoUrl();
      const res = await upload(await body(), type);
      assert.equal(res.status, status);
      const problem = (await res.json()) as { code?: string; param?: string };
      if (code) assert.equal(problem.code, code);
      if (status !== 413 && code !== "invalid_request" && code !== "unsupported_media_type") {
        assert.equal(problem.param, "logo");
      }
      assert.equal(await logoUrl(), before);
    });
  }

  test("only a tenant admin uploads: an operator is refused, another tenant's admin cannot reach this tenant", async () => {
    const operator = await seedStaffUser(t().db, tenant, [{ of: tenant, role: "operator" }]);
    const token = await userToken(t().db, tenant, operator, `${running.url}/auth/v1`);
    const before = await logoUrl();
    const res = await fetch(`${running.url}/admin/v1/settings/logo`, {
      method: "POST",
      headers: { apikey: keys.anon_key, authorization: `Bearer ${token}`, "content-type": "image/png" },
      body: await png(64, 64),
    });
    assert.equal(res.status, 403);
    assert.equal(await logoUrl(), before);

    const mine = await fetch(`${running.url}/admin/v1/settings/logo`, {
      method: "POST",
      headers: {
        apikey: other.keys.service_role_key,
        "content-type": "image/png",
        "backline-tenant": tenant.slug,
      },
      body: await png(64, 64),
    });
    // The other tenant's key acts on its own tenant only, whatever it names.
    assert.notEqual(mine.status, 500);
    assert.equal(await logoUrl(), before);
  });

  test("custom CSS: saved with the settings, served as text/css, named by the portal's tenant file; over 64 KiB refused", async () => {
    const css = ".brand-name { letter-spacing: 0.1em; }\n";
    const patch = (body: unknown) =>
      fetch(`${running.url}/admin/v1/settings`, {
        method: "PATCH",
        headers: { apikey: other.keys.service_role_key, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    assert.equal((await patch({ branding: { custom_css: css } })).status, 200);
    const url = (await portalTenant(other.tenant.slug)).branding.custom_css_url;
    assert.match(url ?? "", new RegExp(`^/brand/${other.tenant.id}/custom\\.css\\?v=[0-9a-f]{12}$`));
    const served = await fetch(`${running.url}${url}`);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get("content-type"), "text/css; charset=utf-8");
    assert.equal(await served.text(), css);

    const tooBig = await patch({ branding: { custom_css: "a".repeat(65537) } });
    assert.equal(tooBig.status, 400);
    const problem = (await tooBig.json()) as { errors: { param: string }[] };
    assert.deepEqual(
      problem.errors.map((e) => e.param),
      ["branding.custom_css"],
    );
    assert.equal(await (await fetch(`${running.url}${url}`)).text(), css, "unchanged");

    assert.equal((await patch({ branding: { custom_css: null } })).status, 200);
    assert.equal((await fetch(`${running.url}/brand/${other.tenant.id}/custom.css`)).status, 404);
    assert.equal((await fetch(`${running.url}/brand/not-a-tenant/custom.css`)).status, 404);
  });
});
