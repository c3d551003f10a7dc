import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * A copy or a move into a bucket obeys that bucket's size limit and media types as an upload
 * there does (security review): a 5 KB text/html object copied into a public bucket that takes
 * only small PNGs was served back as text/html from its public URL.
 */
describeEachEngine("storage: copy and move obey the destination bucket's limits", (t) => {
  let app: RunningApp;
  let storage: SupabaseClient["storage"];
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d]);

  before(async () => {
    app = await startApp(t());
    const { keys } = await tenantWithKeys(t(), { settings: UNLIMITED });
    storage = createClient(app.url, keys.service_role_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    }).storage;
    assert.equal((await storage.createBucket("inbox", { public: false })).error, null);
    assert.equal(
      (
        await storage.createBucket("logos", {
          public: true,
          allowedMimeTypes: ["image/png"],
          fileSizeLimit: 10,
        })
      ).error,
      null,
    );
    const inbox = storage.from("inbox");
    for (const [name, body, contentType] of [
      ["page.html", "<script>alert(1)</script>".repeat(200), "text/html"],
      ["tiny.png", png, "image/png"],
      ["big.png", new Uint8Array(50), "image/png"],
    ] as const) {
      assert.equal((await inbox.upload(name, body, { contentType })).error, null, name);
    }
  });
  after(async () => {
    await app?.close();
  });

  const cases: [string, "copy" | "move", string, number | null][] = [
    ["an HTML page copied into a PNG-only bucket", "copy", "page.html", 415],
    ["an HTML page moved into a PNG-only bucket", "move", "page.html", 415],
    ["a PNG over the bucket's size copied", "copy", "big.png", 413],
    ["a PNG over the bucket's size moved", "move", "big.png", 413],
    ["a small PNG copied", "copy", "tiny.png", null],
  ];
  for (const [what, act, name, status] of cases) {
    test(`${what}: ${status ?? "accepted"}`, async () => {
      const { error } = await storage
        .from("inbox")
        [act](name, `copied-${act}-${name}`, { destinationBucket: "logos" });
      if (status === null) {
        assert.equal(error, null);
        const { data } = await storage.from("logos").list();
        assert.ok(data?.some((o) => o.name === `copied-${act}-${name}`));
        return;
      }
      assert.ok(error, `${what} must be refused`);
      assert.equal(
        (error as { status?: number; statusCode?: string }).status ??
          Number((error as { statusCode?: string }).statusCode),
        status,
      );
      const { data } = await storage.from("logos").list();
      assert.ok(!data?.some((o) => o.name === `copied-${act}-${name}`), "nothing arrived");
      const still = await storage.from("inbox").exists(name);
      assert.equal(still.data, true, "the source is still there");
    });
  }
});
