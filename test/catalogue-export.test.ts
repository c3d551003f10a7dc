import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { hashPassword } from "../src/auth/passwords.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg } from "./support/media-fixtures.ts";
import { expectStatus, issueTestKey, publicApi } from "./support/public-api.ts";
import { seedAccount } from "./support/seed.ts";
import { type Api, artworkUrl, draft } from "./support/uploads.ts";

/**
 * GET /catalogue/export (docs/privacy.md, "The account's catalogue"): an account's whole catalogue
 * as one JSON document, each release exactly as GET /releases/{id} answers it, and where each
 * media file is in /storage/v1 — a path that storage-js downloads, byte for byte. Another
 * account's key sees none of it. Real server, real HTTP, supabase-js for the download.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "Correct-Horse-7";

describeEachEngine("public API: an account's catalogue export", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let account: Account;
  let api: Api;
  let release: { id: string; tracks: string[] };
  let cover: Buffer;

  before(async () => {
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } }));
    account = await seedAccount(t().db, tenant, "Lantern Records");
    api = publicApi(app.url, (await issueTestKey(t().db, account)).secret);
    release = await draft(api, 2);
    cover = await artworkJpeg();
    const target = await artworkUrl(api, release.id, { filename: "cover.jpg" });
    const put = await fetch(target.upload_url, {
      method: target.method,
      headers: target.headers,
      body: cover,
    });
    assert.equal(put.status, 200, await put.text());
  });
  after(async () => {
    await app?.close();
  });

  test("every artist and release, as the single reads answer them, and the media files' places", async () => {
    const res = await api<Obj>("GET", "/catalogue/export");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.headers.get("content-disposition") ?? "", /^attachment; filename="backline-catalogue-/);
    const doc = res.body;
    assert.equal(doc.format, "backline.catalogue-export");
    assert.equal(doc.version, 1);
    assert.equal(doc.account_id, account.id);
    const releases = doc.releases as Obj[];
    assert.equal(releases.length, 1);
    const single = expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.deepEqual(releases[0], single, "the same serializer as GET /releases/{id}");
    assert.equal((releases[0]?.tracks as Obj[] | undefined)?.length, 2);
    assert.ok((doc.artists as Obj[]).length >= 1);
    const files = doc.media_files as Obj[];
    assert.equal(files.length, 1);
    assert.deepEqual(
      { bucket: files[0]?.bucket, path: files[0]?.path, sha256: files[0]?.sha256 },
      {
        bucket: "artwork",
        path: `${release.id}/cover.jpg`,
        sha256: createHash("sha256").update(cover).digest("hex"),
      },
    );

    // A member of the account downloads the file at that place with storage-js.
    const email = `owner.${release.id.slice(0, 8)}@example.org`;
    const passwordHash = await hashPassword(PASSWORD);
    await t().db.asService(async (tx) => {
      const u = await tx.query<{ id: string }>(
        `insert into internal.users (tenant_id, email, encrypted_password, email_confirmed_at, email_proven_at)
         values ($1, $2, $3, now(), now()) returning id`,
        [tenant.id, email, passwordHash],
      );
      await tx.query(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [tenant.id, account.id, u.rows[0]?.id],
      );
    });
    const supabase = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signedIn = await supabase.auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(signedIn.error, null);
    const { data, error } = await supabase.storage
      .from(String(files[0]?.bucket))
      .download(String(files[0]?.path));
    assert.equal(error, null);
    assert.ok(data);
    assert.ok(Buffer.from(await data.arrayBuffer()).equals(cover), "byte for byte");

    // The member's own token, naming the account, gets the same catalogue.
    const token = signedIn.data.session?.access_token ?? "";
    const byMember = await publicApi(app.url, token)<Obj>("GET", "/catalogue/export", undefined, {
      "backline-account": account.id,
    });
    assert.equal(byMember.status, 200);
    assert.deepEqual(byMember.body.releases, releases);
    const unnamed = await publicApi(app.url, token)<Obj>("GET", "/catalogue/export");
    assert.equal(unnamed.status, 400);
    assert.equal(unnamed.body.code, "account_required");
  });

  test("another account's key exports its own catalogue, with nothing of this one", async () => {
    const other = await seedAccount(t().db, tenant, "Other Label");
    const otherApi = publicApi(app.url, (await issueTestKey(t().db, other)).secret);
    const res = await otherApi<Obj>("GET", "/catalogue/export");
    assert.equal(res.status, 200);
    assert.equal(res.body.account_id, other.id);
    assert.deepEqual([res.body.releases, res.body.media_files], [[], []]);
    assert.ok(!JSON.stringify(res.body).includes(release.id));
    // A key without catalog:read: refused.
    const noScope = publicApi(
      app.url,
      (await issueTestKey(t().db, other, { scopes: ["webhooks:manage"] })).secret,
    );
    assert.equal((await noScope("GET", "/catalogue/export")).status, 403);
  });
});
