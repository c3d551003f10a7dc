import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { createClient, type Session } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, startServer, tempDir } from "./support/process.ts";

/**
 * The operator's side of auth, as an operator runs it: `backline tenants rotate-keys`,
 * `backline accounts add-member` and `backline mail list` on an embedded database of their own,
 * with the real server started in between to sign users up.
 */
describe("backline CLI: keys, members and the mailbox", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://api.example.com" };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const text = async (...args: string[]) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout;
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  /** Runs the real server on the data directory for `fn`, then stops it (the CLI needs the directory back). */
  async function withServer<T>(fn: (url: string) => Promise<T>): Promise<T> {
    const server = await startServer(env);
    try {
      return await fn(server.url);
    } finally {
      assert.equal(await server.stop(), 0, server.output());
    }
  }
  const client = (url: string, anonKey: string) =>
    createClient(url, anonKey, { auth: { persistSession: false, autoRefreshToken: false } });
  const settingsStatus = async (url: string, apikey: string) =>
    (await fetch(`${url}/auth/v1/settings`, { headers: { apikey } })).status;

  const invitee = `Mira.Vale-${randomUUID().slice(0, 6)}@Example.com`;
  let tenant: { id: string; slug: string; anon_key: string; service_role_key: string };
  let account: { id: string };
  let devSession: Session | undefined;

  test("mail list on an empty mailbox: [] and (no mail)", async () => {
    assert.deepEqual(await json("mail", "list"), []);
    assert.equal((await text("mail", "list")).trim(), "(no mail)");
  });

  test("accounts add-member invites an address that has no user yet", async () => {
    tenant = await json("tenants", "create", "--name", "Night Owl Distribution");
    account = await json("accounts", "create", "--tenant", tenant.slug, "--name", "Night Owl Records");
    const invited = await json(
      "accounts",
      "add-member",
      "--account",
      account.id,
      "--email",
      invitee,
      "--role",
      "viewer",
    );
    assert.match(invited.invitation_id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(
      { ...invited, invitation_id: undefined },
      {
        status: "invited",
        invitation_id: undefined,
        email: invitee.toLowerCase(),
        account_id: account.id,
        role: "viewer",
      },
    );
    // The text form; inviting again replaces the role of the open invitation.
    assert.match(
      await text("accounts", "add-member", "--account", account.id, "--email", invitee, "--role", "member"),
      new RegExp(`^Invited ${invitee.toLowerCase().replace(/[.]/g, "\\.")} to ${account.id} as member`),
    );
  });

  test("add-member mails the invite link; the invitee's sign-up does not make them a member, the link does", async () => {
    // The two add-member calls above each mailed an invite; the newer link replaces the older.
    const invites = await json("mail", "list", "--to", invitee);
    assert.deepEqual(
      invites.map((m: { kind: string; subject: string; tenant_id: string }) => [
        m.kind,
        m.subject,
        m.tenant_id,
      ]),
      [
        ["auth.invite", "You have been invited", tenant.id],
        ["auth.invite", "You have been invited", tenant.id],
      ],
    );
    const [newest] = invites;
    assert.match(newest.text_body, /invited to join Night Owl Records \(as member\)/);
    assert.match(newest.text_body, /https:\/\/api\.example\.com\/auth\/v1\/verify\?token=\S+&type=invite/);
    const code = /code: (\d{6})\b/.exec(newest.text_body)?.[1];
    assert.ok(code);

    const userId = await withServer(async (url) => {
      const { data, error } = await client(url, tenant.anon_key).auth.signUp({
        email: invitee,
        password: "Correct-Horse-7",
      });
      assert.equal(error, null);
      assert.equal(data.session, null, "the tenant confirms e-mail addresses");
      // And a user of the development tenant (no confirmation), for the key rotation below.
      const dev = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8"));
      const signedUp = await client(url, dev.anon_key).auth.signUp({
        email: `dev-${randomUUID().slice(0, 6)}@example.com`,
        password: "Correct-Horse-7",
      });
      assert.equal(signedUp.error, null);
      devSession = signedUp.data.session ?? undefined;
      return data.user?.id;
    });

    // Signed up, not confirmed: add-member invites again rather than adding.
    const again = await json("accounts", "add-member", "--account", account.id, "--email", invitee);
    assert.equal(again.status, "invited");

    const mails = await json("mail", "list");
    assert.equal(mails.length, 4);
    const signup = mails.find((m: { kind: string }) => m.kind === "auth.signup");
    assert.deepEqual(
      {
        tenant_id: signup.tenant_id,
        to: signup.to_address,
        kind: signup.kind,
        status: signup.status,
        subject: signup.subject,
      },
      {
        tenant_id: tenant.id,
        to: invitee.toLowerCase(),
        kind: "auth.signup",
        status: "stored",
        subject: "Confirm your sign-up",
      },
    );
    assert.match(signup.text_body, /https:\/\/api\.example\.com\/auth\/v1\/verify\?token=/);
    assert.match(signup.text_body, /code: \d{6}\b/);

    const filters: { args: string[]; count: number }[] = [
      { args: ["--to", invitee.toUpperCase()], count: 4 },
      { args: ["--tenant", "dev"], count: 0 },
    ];
    for (const f of filters) {
      assert.equal((await json("mail", "list", ...f.args)).length, f.count, f.args.join(" "));
    }
    const human = await text("mail", "list");
    assert.match(human, new RegExp(`stored {2}to ${invitee.toLowerCase().replace(/[.]/g, "\\.")}`));
    assert.match(human, /^Subject: Confirm your sign-up$/m);

    // The invitee uses the newest invite: a member, signed in.
    const newestInvite = (await json("mail", "list", "--to", invitee)).find(
      (m: { kind: string }) => m.kind === "auth.invite",
    );
    const inviteCode = /code: (\d{6})\b/.exec(newestInvite.text_body)?.[1];
    assert.ok(inviteCode);
    await withServer(async (url) => {
      const { data, error } = await client(url, tenant.anon_key).auth.verifyOtp({
        email: invitee,
        token: inviteCode,
        type: "invite",
      });
      assert.equal(error, null);
      assert.equal(data.user?.id, userId);
    });

    // Now the address is proven: add-member adds it (and changes its role) at once.
    const added = await json(
      "accounts",
      "add-member",
      "--account",
      account.id,
      "--email",
      invitee,
      "--role",
      "admin",
    );
    assert.deepEqual(added, { status: "added", user_id: userId, account_id: account.id, role: "admin" });
  });

  test("tenants rotate-keys: new keys; the old keys and the access tokens they issued are refused", async () => {
    const before = await json("tenants", "keys", "dev");
    const rotated = await json("tenants", "rotate-keys", "dev");
    assert.deepEqual(Object.keys(rotated).sort(), [
      "anon_key",
      "service_role_key",
      "signing_key_id",
      "tenant_id",
      "url",
    ]);
    assert.equal(rotated.url, "https://api.example.com");
    assert.equal(rotated.tenant_id, before.tenant_id);
    assert.notEqual(rotated.anon_key, before.anon_key);
    assert.notEqual(rotated.service_role_key, before.service_role_key);
    assert.deepEqual(
      [decodeJwt(rotated.anon_key).role, decodeJwt(rotated.service_role_key).role],
      ["anon", "service_role"],
    );
    assert.equal("jwt_secret" in rotated, false, "the signing secret is never printed");
    const shown = await json("tenants", "keys", "dev");
    assert.deepEqual([shown.anon_key, shown.service_role_key], [rotated.anon_key, rotated.service_role_key]);
    // Other tenants keep theirs.
    assert.equal((await json("tenants", "keys", tenant.slug)).anon_key, tenant.anon_key);

    assert.ok(devSession);
    const session = devSession;
    await withServer(async (url) => {
      assert.equal(await settingsStatus(url, before.anon_key), 401, "the old anon key is refused");
      assert.equal(await settingsStatus(url, rotated.anon_key), 200);
      assert.equal(await settingsStatus(url, tenant.anon_key), 200);
      const fresh = client(url, rotated.anon_key);
      const old = await fresh.auth.getUser(session.access_token);
      assert.equal(old.error?.status, 403);
      assert.equal(old.error?.code, "bad_jwt");
      // Sessions are kept: the refresh token gets a token signed with the new secret.
      const refreshed = await fresh.auth.refreshSession({ refresh_token: session.refresh_token });
      assert.equal(refreshed.error, null);
      const user = await fresh.auth.getUser(refreshed.data.session?.access_token);
      assert.equal(user.data.user?.id, session.user.id);
    });
    // The server rewrote dev-tenant.json with the new keys.
    const file = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8"));
    assert.equal(file.anon_key, rotated.anon_key);
  });

  // Status 1: the command could not do it; 2: it was called wrongly (docs/cli.md).
  const errors: { name: string; args: () => string[]; message: RegExp; status: 1 | 2 }[] = [
    {
      name: "rotate-keys for an unknown tenant",
      args: () => ["tenants", "rotate-keys", "nope"],
      message: /^backline: no tenant nope$/m,
      status: 1,
    },
    {
      name: "add-member to an unknown account",
      args: () => [
        "accounts",
        "add-member",
        "--account",
        "00000000-0000-4000-8000-000000000000",
        "--email",
        "a@b.co",
      ],
      message: /^backline: no account 00000000-0000-4000-8000-000000000000$/m,
      status: 1,
    },
    {
      name: "add-member with an unknown role",
      args: () => ["accounts", "add-member", "--account", account.id, "--email", "a@b.co", "--role", "boss"],
      message: /argument 'boss' is invalid\. expected one of owner, admin, member, viewer/,
      status: 2,
    },
    {
      name: "mail list for an unknown tenant",
      args: () => ["mail", "list", "--tenant", "nope"],
      message: /^backline: no tenant nope$/m,
      status: 1,
    },
    {
      name: "mail list with --limit 0",
      args: () => ["mail", "list", "--limit", "0"],
      message: /expected a whole number from 1 to 1000/,
      status: 2,
    },
  ];
  for (const c of errors) {
    test(`refuses ${c.name} with exit code ${c.status} and no stack trace`, async () => {
      const r = await runCli(c.args(), env);
      assert.equal(r.code, c.status, r.stdout);
      assert.match(r.stderr, c.message);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  }
});
