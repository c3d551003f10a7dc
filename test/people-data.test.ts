import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { KEPT_WITH_ADDRESS, PERSONAL_COLUMN, PERSONAL_TABLES } from "../src/people/tables.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey, publicApi } from "./support/public-api.ts";
import { seedAccount, seedStaffUser, seedUser } from "./support/seed.ts";

/**
 * People's own data (docs/privacy.md): every table with a personal-looking column is reviewed
 * (src/people/tables.ts); a member exports their data over real HTTP with their own session, and
 * nobody else's; a tenant's admin exports and erases through /admin/v1, another tenant's cannot;
 * the CLI does both; after an erasure no table but the kept ones holds the person's address, and
 * the audit log is still append-only, its rewrite recorded.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "Correct-Horse-7";

describeEachEngine("people's own data: export and erasure", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;
  let label: Account;
  let side: Account;
  const email = `ana.${randomUUID().slice(0, 8)}@example.org`;
  let anaId = "";
  let anaToken = "";
  let anaRefresh = "";
  let anaClient: SupabaseClient;
  let bob: { id: string; email: string; token: string };
  let payeeId = "";

  /** A statement as the schema owner (PGlite's superuser, or PostgreSQL's from TEST_DATABASE_URL). */
  const sql = <T extends Obj = Obj>(text: string, params: unknown[] = []) =>
    t().owner.transaction((tx) => tx.query<T>(text, params), { readOnly: false });

  const client = (anon: string): SupabaseClient =>
    createClient(app.url, anon, { auth: { persistSession: false, autoRefreshToken: false } });

  const admin = async (
    method: string,
    path: string,
    options: { key?: string; bearer?: string; body?: unknown } = {},
  ) => {
    const key = options.key ?? keys.service_role_key;
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: {
        apikey: key,
        authorization: `Bearer ${options.bearer ?? key}`,
        ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Obj };
  };

  /** Signs a new person up through /auth/v1 with supabase-js: a user, an identity, a session. */
  const signUp = async (address: string) => {
    const c = client(keys.anon_key);
    const { data, error } = await c.auth.signUp({ email: address, password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.user && data.session);
    return {
      client: c,
      id: data.user.id,
      token: data.session.access_token,
      refresh: data.session.refresh_token,
    };
  };

  before(async () => {
    app = await startApp(t());
    const db = t().db;
    ({ tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } }));
    ({ keys: otherKeys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } }));
    label = await seedAccount(db, tenant, "Lantern Records");
    side = await seedAccount(db, tenant, "Side Project");

    const ana = await signUp(email);
    anaId = ana.id;
    anaToken = ana.token;
    anaRefresh = ana.refresh;
    anaClient = ana.client;
    const enrolled = await anaClient.auth.mfa.enroll({ factorType: "totp", friendlyName: "Ana's phone" });
    assert.equal(enrolled.error, null);
    const co = await seedUser(db, tenant, []);
    const b = await signUp(`bob.${randomUUID().slice(0, 8)}@example.org`);
    bob = { id: b.id, email: (await b.client.auth.getUser()).data.user?.email ?? "", token: b.token };

    await db.asService(async (tx) => {
      await tx.query(
        `insert into internal.memberships (tenant_id, account_id, user_id, role)
         values ($1, $2, $3, 'owner'), ($1, $2, $4, 'owner'), ($1, $5, $3, 'member'), ($1, $2, $6, 'member')`,
        [tenant.id, label.id, anaId, co.id, side.id, bob.id],
      );
      await tx.query(
        `insert into public.notifications (tenant_id, user_id, account_id, kind, title, body)
         values ($1, $2, $3, 'release.approved', 'Approved', 'Your release is approved')`,
        [tenant.id, anaId, label.id],
      );
      // An invitation to her address (from the co-owner), and one she sent.
      await tx.query(
        `insert into internal.invitations (tenant_id, account_id, email, role, invited_by)
         values ($1, $2, $3, 'viewer', $4), ($1, $2, $5, 'viewer', $6)`,
        [tenant.id, side.id, email, co.id, `guest.${randomUUID().slice(0, 6)}@example.org`, anaId],
      );
      payeeId = (
        await tx.query<{ id: string }>(
          `insert into internal.payees (tenant_id, account_id, kind, email, name, currency, tax_name, tax_id_last4,
             payout_method)
           values ($1, $2, 'person', $3, 'Ana Lima', 'USD', 'Ana Lima', '6789', $4) returning id`,
          [tenant.id, label.id, email, JSON.stringify({ provider: "paypal", email })],
        )
      ).rows[0]?.id as string;
      const ticket = (
        await tx.query<{ id: string }>(
          `insert into internal.tickets (tenant_id, account_id, opened_by, subject) values ($1, $2, $3, 'My split')
           returning id`,
          [tenant.id, label.id, anaId],
        )
      ).rows[0]?.id;
      await tx.query(
        "insert into internal.ticket_replies (ticket_id, author_user_id, body) values ($1, $2, 'Please check')",
        [ticket, anaId],
      );
      // Her passkey, one she is registering, and a sign-in through a provider under way (migrations
      // 0054, 0052); Bob's passkey, which her erasure leaves alone.
      await tx.query(
        `insert into internal.passkeys (tenant_id, user_id, credential_id, public_key, rp_id, friendly_name, device_type)
         values ($1, $2, $3, $4, 'localhost', 'Ana''s laptop', 'multiDevice'),
                ($1, $5, $6, $4, 'localhost', 'Bob''s key', 'singleDevice')`,
        [tenant.id, anaId, `ana-${randomUUID()}`, Buffer.alloc(32, 1), bob.id, `bob-${randomUUID()}`],
      );
      await tx.query(
        `insert into internal.passkey_challenges (tenant_id, user_id, kind, challenge, rp_id, expires_at)
         values ($1, $2, 'registration', $3, 'localhost', now() + interval '5 minutes')`,
        [tenant.id, anaId, randomUUID().replace(/-/g, "")],
      );
      await tx.query(
        `insert into internal.oauth_flow_states (tenant_id, provider, nonce, provider_code_verifier, redirect_to,
           link_user_id, expires_at)
         values ($1, 'oidc:acme', 'n', 'v', 'http://localhost/portal/', $2, now() + interval '5 minutes')`,
        [tenant.id, anaId],
      );
    });

    // Acts of her own over HTTP: an API key (its code is mailed to the owners), in the audit log
    // with her address and client address.
    const made = await publicApi(app.url, anaToken)(
      "POST",
      "/api-keys",
      { name: "Ana's key", scopes: ["catalog:read"] },
      { "backline-account": label.id },
    );
    assert.equal(made.status, 201, JSON.stringify(made.body));
  });
  after(async () => {
    await app?.close();
  });

  test("every table with a personal-looking column is reviewed in src/people/tables.ts and docs/privacy.md", async () => {
    const columns = await sql<{ tbl: string; col: string }>(
      `select n.nspname || '.' || c.relname as tbl, a.attname as col
         from pg_catalog.pg_class c
         join pg_catalog.pg_namespace n on n.oid = c.relnamespace
         join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        where c.relkind in ('r', 'p')
          and n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
          and n.nspname not like 'pg\\_%'
        order by 1, a.attnum`,
    );
    assert.ok(columns.rows.length > 300, "the catalogue lists the tables");
    const missing: string[] = [];
    const tables = new Set<string>();
    for (const { tbl, col } of columns.rows) {
      tables.add(tbl);
      if (!PERSONAL_COLUMN.test(col)) continue;
      if (!PERSONAL_TABLES[tbl]?.columns.includes(col)) missing.push(`${tbl}.${col}`);
    }
    assert.deepEqual(
      missing,
      [],
      "columns that look personal, in no entry of src/people/tables.ts: decide what export and erasure do with them",
    );
    // No entry names a table that is gone, and docs/privacy.md names each.
    const privacy = fs.readFileSync(new URL("../docs/privacy.md", import.meta.url), "utf8");
    for (const tbl of Object.keys(PERSONAL_TABLES)) {
      assert.ok(tables.has(tbl), `${tbl} is in src/people/tables.ts but not in the database`);
      assert.ok(privacy.includes(`\`${tbl}\``), `docs/privacy.md says nothing of ${tbl}`);
    }
    // The rule itself bites: a column named like a person's data is caught.
    for (const col of ["email", "contact_phone", "ip", "user_agent", "owner_user_id", "reviewed_by"])
      assert.ok(PERSONAL_COLUMN.test(col), col);
    for (const col of ["created_at", "status", "shipping", "amount"])
      assert.ok(!PERSONAL_COLUMN.test(col), col);
  });

  test("GET /me/export: the member's own data over HTTP, no secrets; nobody else's", async () => {
    const res = await publicApi(app.url, anaToken)<Obj>("GET", "/me/export");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.headers.get("content-disposition") ?? "", /^attachment; filename="backline-my-data-/);
    const doc = res.body;
    assert.equal(doc.format, "backline.person-export");
    assert.equal(doc.version, 1);
    const user = doc.user as Obj;
    assert.equal(user.id, anaId);
    assert.equal(user.email, email);
    const list = (key: string) => doc[key] as Obj[];
    const accounts = list("memberships").map((m) => m.account_name);
    for (const name of ["Lantern Records", "Side Project"]) assert.ok(accounts.includes(name), name);
    assert.ok(list("identities").some((i) => i.provider === "email"));
    assert.ok(list("sessions").length >= 1 && list("sessions").every((s) => typeof s.ip === "string"));
    assert.deepEqual(
      list("mfa_factors").map((f) => f.friendly_name),
      ["Ana's phone"],
    );
    assert.equal(list("notifications")[0]?.title, "Approved");
    // Her passkey, as she would know it: never its public key or credential id; not Bob's.
    assert.deepEqual(
      list("passkeys").map((k) => [k.friendly_name, k.device_type, "public_key" in k, "credential_id" in k]),
      [["Ana's laptop", "multiDevice", false, false]],
    );
    assert.equal(list("invitations_received").length, 1);
    assert.equal(list("invitations_sent").length, 1);
    assert.deepEqual(
      list("api_keys_created").map((k) => k.name),
      ["Ana's key"],
    );
    assert.deepEqual(
      list("payees").map((p) => [p.id, p.tax_name]),
      [[payeeId, "Ana Lima"]],
    );
    assert.equal((list("tickets")[0]?.replies as Obj[] | undefined)?.length, 1);
    assert.ok(list("mail").length >= 1, "the key's code was mailed to her");
    assert.ok(
      list("audit").some((a) => a.actor === anaId && a.object_table === "internal.api_keys"),
      "her own acts are in it",
    );
    // Another's act about her names that actor by type and id only.
    for (const a of list("audit").filter((a) => a.actor !== anaId)) {
      assert.equal(a.ip, null);
      assert.deepEqual(a.actor_detail, {});
    }
    assert.ok(
      list("audit").some((a) => a.actor === anaId && typeof a.ip === "string"),
      "her own acts keep theirs",
    );
    const text = JSON.stringify(doc);
    for (const secret of [
      "encrypted_password",
      "key_hash",
      "token_hash",
      "secret_sealed",
      "tax_id_sealed",
      "otp_hash",
    ])
      assert.ok(!text.includes(secret), `the export holds no ${secret}`);

    // Bob's export is his own: nothing of Ana.
    const bobs = await publicApi(app.url, bob.token)<Obj>("GET", "/me/export");
    assert.equal(bobs.status, 200);
    assert.equal((bobs.body.user as Obj).id, bob.id);
    assert.ok(!JSON.stringify(bobs.body).includes(email), "Bob's export names nothing of Ana");

    // Not with an API key, nor without a token.
    const key = await issueTestKey(t().db, label);
    const byKey = await publicApi(app.url, key.secret)<Obj>("GET", "/me/export");
    assert.equal(byKey.status, 403);
    assert.equal(byKey.body.code, "person_required");
    assert.equal((await publicApi(app.url, undefined)("GET", "/me/export")).status, 401);
  });

  test("/admin/v1/people: the tenant's admin finds and exports; another tenant's staff and a member cannot", async () => {
    const found = await admin("GET", `/people?email=${encodeURIComponent(email.toUpperCase())}`);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.deepEqual(
      (found.body.data as Obj[]).map((p) => p.user_id),
      [anaId],
    );
    const exported = await admin("GET", `/people/${anaId}/export`);
    assert.equal(exported.status, 200, JSON.stringify(exported.body));
    assert.equal((exported.body.user as Obj).email, email);
    assert.ok((exported.body.payees as Obj[]).length === 1);

    // Another tenant's service-role key: the person is not found there, and nothing is said of her.
    const elsewhere = await admin("GET", `/people/${anaId}/export`, { key: otherKeys.service_role_key });
    assert.equal(elsewhere.status, 404);
    assert.equal(elsewhere.body.code, "not_found");
    const elsewhereFind = await admin("GET", `/people?email=${encodeURIComponent(email)}`, {
      key: otherKeys.service_role_key,
    });
    assert.deepEqual(elsewhereFind.body.data, []);
    const erasedElsewhere = await admin("POST", `/people/${anaId}/erase`, {
      key: otherKeys.service_role_key,
      body: { reason: "ticket 1" },
    });
    assert.equal(erasedElsewhere.status, 404);
    // A member, not staff: refused.
    const byMember = await admin("GET", `/people/${bob.id}/export`, { key: keys.anon_key, bearer: anaToken });
    assert.equal(byMember.status, 403);
    // A malformed id names nothing; an erasure needs its reason.
    assert.equal((await admin("GET", "/people/not-a-uuid/export")).status, 404);
    const noReason = await admin("POST", `/people/${anaId}/erase`, { body: {} });
    assert.equal(noReason.status, 400);
    assert.equal(noReason.body.param, "reason");
  });

  test("erasure is refused while the person is an account's only owner, naming it, and changes nothing", async () => {
    const db = t().db;
    const solo = await seedAccount(db, tenant, "Solo Works");
    const owner = await seedUser(db, tenant, [{ account: solo, role: "owner" }]);
    // An account with a catalogue: not empty, so it is not theirs to take along.
    await sql("insert into public.artist_profiles (account_id, name) values ($1, 'Solo')", [solo.id]);
    const res = await admin("POST", `/people/${owner.id}/erase`, { body: { reason: "ticket 2" } });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.code, "sole_owner");
    assert.match(String(res.body.detail), /Solo Works/);
    const still = await sql<{ email: string; n: number }>(
      `select u.email, (select count(*)::int from internal.memberships m where m.user_id = u.id) as n
         from internal.users u where u.id = $1`,
      [owner.id],
    );
    assert.deepEqual(still.rows[0], { email: owner.email, n: 1 });

    // Staff: their roles go first, by an act of its own.
    const staff = await seedStaffUser(db, tenant, [{ of: tenant, role: "reviewer" }]);
    const refused = await admin("POST", `/people/${staff.id}/erase`, { body: { reason: "ticket 5" } });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, "staff");
  });

  test("erasure through /admin/v1: no table keeps her address but the kept ones; sign-in ends; the audit log holds", async () => {
    const auditBefore = (await sql<{ n: number }>("select count(*)::int as n from internal.audit_log"))
      .rows[0]?.n;
    const res = await admin("POST", `/people/${anaId}/erase`, {
      body: { reason: "ticket 3: erasure request" },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.object, "erasure");
    const tables = res.body.tables as Record<string, number>;
    for (const tbl of [
      "internal.users",
      "internal.memberships",
      "internal.sessions",
      "internal.identities",
      "internal.mfa_factors",
      "public.notifications",
      "internal.invitations",
      "internal.payees",
      "internal.passkeys",
      "internal.passkey_challenges",
      "internal.oauth_flow_states",
    ])
      assert.ok((tables[tbl] ?? 0) >= 1, `${tbl}: ${JSON.stringify(tables)}`);
    assert.ok((tables["internal.audit_log"] ?? 0) >= 1);
    assert.equal(tables["internal.accounts"], 1, "her personal account, empty, went with her");

    // Table by table: every table of the database, her address nowhere but in the kept ones.
    const all = await sql<{ tbl: string }>(
      `select quote_ident(n.nspname) || '.' || quote_ident(c.relname) as tbl
         from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where c.relkind in ('r', 'p') and n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')
          and n.nspname not like 'pg\\_%'`,
    );
    const traces: string[] = [];
    for (const { tbl } of all.rows) {
      if ((KEPT_WITH_ADDRESS as readonly string[]).includes(tbl)) continue;
      const n = (
        await sql<{ n: number }>(
          `select count(*)::int as n from ${tbl} x where strpos(lower(x::text), $1) > 0`,
          [email],
        )
      ).rows[0]?.n;
      if (n)
        traces.push(
          `${tbl}: ${n} ${JSON.stringify((await sql(`select * from ${tbl} x where strpos(lower(x::text), $1) > 0 limit 2`, [email])).rows)}`,
        );
    }
    assert.deepEqual(traces, [], "tables still holding her address");

    const user = (
      await sql<Obj>(
        "select email, phone, encrypted_password, banned_until::text as banned, deleted_at is not null as deleted from internal.users where id = $1",
        [anaId],
      )
    ).rows[0];
    assert.deepEqual(user, {
      email: `erased-${anaId}@erased.invalid`,
      phone: null,
      encrypted_password: null,
      banned: "infinity",
      deleted: true,
    });
    for (const tbl of [
      "internal.sessions",
      "internal.identities",
      "internal.mfa_factors",
      "internal.memberships",
      "internal.passkeys",
      "internal.passkey_challenges",
    ]) {
      const n = (
        await sql<{ n: number }>(`select count(*)::int as n from ${tbl} where user_id = $1`, [anaId])
      ).rows[0]?.n;
      assert.equal(n, 0, tbl);
    }
    assert.equal(
      (await sql("select 1 from internal.oauth_flow_states where link_user_id = $1", [anaId])).rows.length,
      0,
      "her sign-in flows under way",
    );
    assert.equal(
      (await sql("select 1 from internal.passkeys where user_id = $1", [bob.id])).rows.length,
      1,
      "Bob's passkey is his",
    );
    // The ledger keeps the payee's id; its personal fields are gone.
    const payee = (
      await sql<Obj>(
        "select name, email, tax_name, tax_id_last4, payout_method, erased_at is not null as erased from internal.payees where id = $1",
        [payeeId],
      )
    ).rows[0];
    assert.deepEqual(payee, {
      name: null,
      email: null,
      tax_name: null,
      tax_id_last4: null,
      payout_method: null,
      erased: true,
    });

    // Sign-in is over: the refresh token is refused, and the old access token exports nothing.
    const refreshed = await client(keys.anon_key).auth.refreshSession({ refresh_token: anaRefresh });
    assert.ok(refreshed.error, "the refresh token no longer works");
    const signIn = await client(keys.anon_key).auth.signInWithPassword({ email, password: PASSWORD });
    assert.ok(signIn.error, "the password no longer works");
    assert.equal((await publicApi(app.url, anaToken)("GET", "/me/export")).status, 403);

    // The audit log: her acts keep her id (a pseudonym now), their address and e-mail read "erased";
    // the rewrite and the erasure are recorded; the log is still append-only, to its owner too.
    const hers = await sql<{ ip: string | null; email: unknown }>(
      "select ip, actor_detail -> 'email' as email from internal.audit_log where actor_type = 'user' and actor = $1",
      [anaId],
    );
    assert.ok(hers.rows.length >= 1);
    for (const r of hers.rows) {
      assert.ok(r.ip === null || r.ip === "erased", String(r.ip));
      assert.ok(r.email === null || r.email === undefined || r.email === "erased", String(r.email));
    }
    const records = await sql<{ action: string; after: Obj | null; actor: string }>(
      `select action, after, actor from internal.audit_log
        where id > 0 and action in ('audit.rewrite', 'person.erased') and (tenant_id = $1 or tenant_id is null)
          and (action = 'person.erased' and object_id = $2 or action = 'audit.rewrite') order by id`,
      [tenant.id, anaId],
    );
    const rewrite = records.rows.find(
      (r) => r.action === "audit.rewrite" && String(r.after?.reason).includes("ticket 3"),
    );
    assert.ok(rewrite, "the rewrite records itself, with the reason");
    assert.equal(rewrite.after?.marker, "erased");
    assert.ok(
      records.rows.some((r) => r.action === "person.erased"),
      "the erasure is audited",
    );
    const auditAfter = (await sql<{ n: number }>("select count(*)::int as n from internal.audit_log")).rows[0]
      ?.n;
    assert.ok((auditAfter ?? 0) > (auditBefore ?? 0), "nothing was deleted from the log");
    await assert.rejects(
      sql("update internal.audit_log set ip = 'x' where actor = $1", [anaId]),
      /append-only/,
    );
    await assert.rejects(sql("delete from internal.audit_log where actor = $1", [anaId]), /append-only/);

    // Once is enough.
    const again = await admin("POST", `/people/${anaId}/erase`, { body: { reason: "again" } });
    assert.equal(again.status, 409);
    assert.equal(again.body.code, "already_erased");
  });

  test("backline people export and erase: by address, --yes required, audited as the command", async () => {
    const exported = await runCliOn(t(), ["people", "export", bob.email, "--tenant", tenant.slug]);
    assert.equal(exported.code, 0, exported.stderr);
    const doc = JSON.parse(exported.stdout) as Obj;
    assert.equal((doc.user as Obj).id, bob.id);

    const missing = await runCliOn(t(), ["people", "export", "nobody@example.org"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no user nobody@example\.org/);

    const unconfirmed = await runCliOn(t(), ["people", "erase", bob.email]);
    assert.equal(unconfirmed.code, 2);
    assert.match(unconfirmed.stderr, /--yes/);
    const still = await sql<{ email: string }>("select email from internal.users where id = $1", [bob.id]);
    assert.equal(still.rows[0]?.email, bob.email);

    const erased = await runCliOn(t(), [
      "--json",
      "people",
      "erase",
      bob.email,
      "--yes",
      "--reason",
      "ticket 4",
    ]);
    assert.equal(erased.code, 0, erased.stderr);
    const out = JSON.parse(erased.stdout) as Obj;
    assert.equal(out.status, "erased");
    assert.equal((out.tables as Obj)["internal.memberships"], 2, "Lantern Records and his personal account");
    assert.equal((out.tables as Obj)["internal.accounts"], 1, "his personal account, empty, is gone");
    const row = await sql<{ actor: string }>(
      "select actor from internal.audit_log where action = 'person.erased' and object_id = $1",
      [bob.id],
    );
    assert.match(row.rows[0]?.actor ?? "", /^cli:people erase/);
  });
});
