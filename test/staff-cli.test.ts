import assert from "node:assert/strict";
import fs from "node:fs";
import { after, describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { freePort, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * The newcomer's story of docs/console.md, as they live it on the embedded default: `npm start`
 * made the development tenant; one command, `backline staff add --tenant dev --email ... --role
 * admin`, invites their address and prints the link (no SMTP_URL: the mail stays in the local
 * mailbox); the link signs them in and sends them to /console; they choose a password, and
 * /admin/v1 knows them as the development tenant's admin. Then `staff list` and `staff remove`,
 * which takes effect at once. The real server and the real command, on one data directory.
 */
describe("backline staff: the development tenant's first staff member", () => {
  const dataDir = tempDir();
  let env: Record<string, string>;
  const cli = async (...args: string[]) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout;
  };
  const json = async (...args: string[]) => JSON.parse(await cli("--json", ...args));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  async function withServer<T>(fn: (url: string) => Promise<T>): Promise<T> {
    const server = await startServer(env);
    try {
      return await fn(server.url);
    } finally {
      assert.equal(await server.stop(), 0, server.output());
    }
  }

  const email = "me@example.com";
  let invite: string;
  let accessToken: string;
  let anonKey: string;

  test("staff add --tenant dev, before the server ever started: the development tenant is made, the address invited, the link and the console's address printed", async () => {
    const port = await freePort();
    env = { DATA_DIR: dataDir, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` };
    // Before the first start: the command makes the development tenant, as `npm start` would.
    const added = await json("staff", "add", "--tenant", "dev", "--email", email, "--role", "admin");
    assert.equal(added.status, "invited");
    assert.deepEqual(
      [added.email, added.tenant_slug, added.role, added.active],
      [email, "dev", "admin", false],
    );
    assert.equal(added.console_url, `${env.PUBLIC_URL}/console/`);
    assert.match(added.invite_link, new RegExp(`^${env.PUBLIC_URL}/auth/v1/verify\\?token=`));
    invite = added.invite_link;
    // Adding again (text form) mails a fresh link and says how to go on.
    const text = await cli("staff", "add", "--tenant", "dev", "--email", email, "--role", "admin");
    assert.match(text, /me@example\.com will be admin of dev once they prove the address/);
    assert.match(
      text,
      /Open its link to choose a password:\n {2}http:\/\/127\.0\.0\.1:\d+\/auth\/v1\/verify\?token=/,
    );
    assert.match(text, /Then sign in at http:\/\/127\.0\.0\.1:\d+\/console\//);
    invite = /^\s+(http\S+verify\S+)$/m.exec(text)?.[1] as string;
  });

  test("the link signs them in and sends them to /console; they choose a password; /admin/v1 knows them as admin", async () => {
    await withServer(async (url) => {
      const tenant = (await (await fetch(`${url}/console/tenant.json`)).json()) as Record<string, string>;
      assert.equal(tenant.slug, "dev");
      anonKey = tenant.anon_key as string;

      const res = await fetch(invite, { redirect: "manual" });
      assert.equal(res.status, 303);
      const location = new URL(res.headers.get("location") ?? "");
      assert.equal(`${location.origin}${location.pathname}`, `${env.PUBLIC_URL}/console/`);
      const fragment = new URLSearchParams(location.hash.slice(1));
      assert.equal(fragment.get("type"), "invite");
      accessToken = fragment.get("access_token") as string;
      assert.ok(accessToken);

      const supabase = createClient(url, anonKey, {
        auth: { persistSession: false, autoRefreshToken: false },
      });
      const set = await fetch(`${url}/auth/v1/user`, {
        method: "PUT",
        headers: {
          apikey: anonKey,
          authorization: `Bearer ${accessToken}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ password: "a long enough passphrase" }),
      });
      assert.equal(set.status, 200);
      const signedIn = await supabase.auth.signInWithPassword({
        email,
        password: "a long enough passphrase",
      });
      assert.equal(signedIn.error, null);
      const token = signedIn.data.session?.access_token as string;

      const me = await fetch(`${url}/admin/v1/me`, {
        headers: { apikey: anonKey, authorization: `Bearer ${token}` },
      });
      assert.equal(me.status, 200);
      const body = (await me.json()) as {
        user: { email: string };
        staff: { tenant_slug: string; role: string }[];
      };
      assert.equal(body.user.email, email);
      assert.deepEqual(
        body.staff.map((s) => [s.tenant_slug, s.role]),
        [["dev", "admin"]],
      );
      const reviews = await fetch(`${url}/admin/v1/reviews`, {
        headers: { apikey: anonKey, authorization: `Bearer ${token}` },
      });
      assert.equal(reviews.status, 200);
      accessToken = token;
    });
  });

  test("staff list shows them; staff remove takes the role away at the next request", async () => {
    assert.match(
      await cli("staff", "list", "--tenant", "dev"),
      /^me@example\.com\s+dev\s+dev\s+admin\s+yes\s/m,
    );
    assert.match(
      await cli("staff", "remove", "--tenant", "dev", "--email", email),
      /me@example\.com is no longer admin of dev/,
    );
    const again = await runCli(["staff", "remove", "--tenant", "dev", "--email", email], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /backline: me@example\.com is not staff of dev/);
    const bad = await runCli(["staff", "add", "--tenant", "dev", "--email", email, "--role", "boss"], env);
    assert.equal(bad.code, 2, "a usage error");
    assert.match(bad.stderr, /expected one of reviewer, operator, admin/);

    await withServer(async (url) => {
      const me = await fetch(`${url}/admin/v1/me`, {
        headers: { apikey: anonKey, authorization: `Bearer ${accessToken}` },
      });
      assert.equal(me.status, 403);
      assert.equal(((await me.json()) as { code: string }).code, "not_staff");
    });
  });
});
