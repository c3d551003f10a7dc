import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";

/**
 * `backline tenants set-portal-domains` (docs/portal.md, "Custom domains"): the host names that
 * show a tenant's portal, one tenant per name, and the site_url mailed links follow.
 */
describe("backline tenants set-portal-domains", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://backline.example.test" };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const misused = async (args: string[], message: RegExp) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 2, r.stdout);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  };
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("domains are kept lower-case, one tenant each; site_url follows the first unless the tenant has its own", async () => {
    const moon = (await json("tenants", "create", "--name", "Moon", "--slug", "moon")) as { id: string };
    await json("tenants", "create", "--name", "Sun", "--slug", "sun");
    assert.deepEqual(
      await json("tenants", "set-portal-domains", "moon", "Music.Moon.test", "fans.moon.test"),
      {
        tenant_id: moon.id,
        portal_domains: ["music.moon.test", "fans.moon.test"],
        site_url: "https://music.moon.test/portal/",
      },
    );
    await misused(
      ["tenants", "set-portal-domains", "sun", "music.moon.test"],
      /already the portal domain of tenant moon/,
    );
    await misused(["tenants", "set-portal-domains", "sun", "https://sun.test/portal"], /is not a host name/);
    await misused(["tenants", "set-portal-domains", "sun", "sun.test:8443"], /is not a host name/);
    // Changing the domains moves a site_url that was the portal's; none removes it.
    assert.equal(
      (await json("tenants", "set-portal-domains", "moon", "fans.moon.test")).site_url,
      "https://fans.moon.test/portal/",
    );
    const none = await json("tenants", "set-portal-domains", "moon", "none");
    assert.deepEqual([none.portal_domains, none.site_url], [[], null]);
    const text = await runCli(["tenants", "set-portal-domains", "sun", "sun.test"], env);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /the portal answers at https:\/\/sun\.test\/portal\//);
    assert.match(text.stdout, /Mailed links now lead to https:\/\/sun\.test\/portal\//);
  });
});
