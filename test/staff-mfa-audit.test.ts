import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { requireAccountAal2, requireStaffAal2, resetMfa } from "../src/auth/mfa-operator.ts";
import { totpCode, totpStep } from "../src/auth/totp.ts";
import { type AuditScope, runWithAuditScope } from "../src/db/audit-context.ts";
import { asDbError } from "../src/db/errors.ts";
import { operatorScope } from "../src/db/operator-scope.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { decideReview } from "../src/pipeline/review.ts";
import { configureStore } from "../src/pipeline/stores.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account } from "../src/tenancy/tenants.ts";
import { createAccount, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey } from "./support/public-api.ts";

/**
 * Where a second factor is required (migration 0020, docs/security.md): staff of a tenant that
 * requires aal2 act only from aal2 sessions, through /admin/v1 and /rest/v1 alike, because the
 * database decides; sensitive acts need aal2 from a person always; an account's owner can require
 * it of the members. And the audit log: a row for each kind of act, in the act's transaction,
 * which no role can change or delete.
 */

const PASSWORD = "Correct-Horse-7";
type Row = Record<string, unknown>;

describeEachEngine("staff and accounts under aal2, and the audit log", (t) => {
  let app: RunningApp;
  const db = () => t().db;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL: "https://api.backline.test", WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  after(async () => {
    await app?.close();
  });

  const rows = <T = Row>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T & Row>(sql, params)).rows as T[]);

  interface World {
    tenant: Tenant;
    keys: TenantKeys;
    accountId: string;
    releaseId: string;
  }

  /** A tenant with an account and a release in review. */
  async function world(): Promise<World> {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const account = await createAccount(db(), { tenantId: tenant.id, name: "Night Owl" });
    const [artist] = await rows<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Luna Vale') returning id",
      [account.id],
    );
    const [release] = await rows<{ id: string }>(
      "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Night Drive') returning id",
      [account.id, artist?.id],
    );
    assert.ok(release);
    await rows("update public.releases set status = 'in_review' where id = $1", [release.id]);
    return { tenant, keys, accountId: account.id, releaseId: release.id };
  }

  interface Person {
    id: string;
    email: string;
    client: SupabaseClient;
    token: () => Promise<string>;
    /** Enrols and verifies a TOTP factor: the client's session is aal2 afterwards. */
    upgrade: () => Promise<void>;
  }

  /** A user of the tenant, signed in (aal1), with a proven address (staff rows count only then). */
  async function person(w: World): Promise<Person> {
    const email = `staff-${randomUUID().slice(0, 8)}@example.com`;
    const client = createClient(app.url, w.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({ email, password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.user);
    await rows("update internal.users set email_proven_at = now() where id = $1", [data.user.id]);
    const token = async () => (await client.auth.getSession()).data.session?.access_token ?? "";
    const upgrade = async () => {
      const enrolled = await client.auth.mfa.enroll({ factorType: "totp" });
      assert.ok(enrolled.data, enrolled.error?.message);
      const verified = await client.auth.mfa.challengeAndVerify({
        factorId: enrolled.data.id,
        code: totpCode(enrolled.data.totp.secret, totpStep()),
      });
      assert.equal(verified.error, null);
      assert.equal(decodeJwt(await token()).aal, "aal2");
    };
    return { id: data.user.id, email, client, token, upgrade };
  }

  async function staff(w: World, role: string, platform = false): Promise<Person> {
    const p = await person(w);
    await rows("insert into internal.staff (user_id, tenant_id, role) values ($1, $2, $3)", [
      p.id,
      platform ? null : w.tenant.id,
      role,
    ]);
    return p;
  }

  async function admin(w: World, who: Person | "service", method: string, path: string, body?: unknown) {
    const headers: Record<string, string> =
      who === "service"
        ? { apikey: w.keys.service_role_key }
        : { apikey: w.keys.anon_key, authorization: `Bearer ${await who.token()}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // CSV or JSON lines: kept as text.
    }
    return { status: res.status, body: parsed as Row, text, headers: res.headers };
  }

  async function restReleases(w: World, who: Person): Promise<unknown[]> {
    const res = await fetch(`${app.url}/rest/v1/releases?select=id&id=eq.${w.releaseId}`, {
      headers: { apikey: w.keys.anon_key, authorization: `Bearer ${await who.token()}` },
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as unknown[];
  }

  /** The error a database call raised: its SQLSTATE and hint. */
  async function refusal(
    p: Promise<unknown>,
  ): Promise<{ sqlstate?: string; hint?: string; message?: string }> {
    try {
      await p;
    } catch (error) {
      const e = asDbError(error);
      return { sqlstate: e?.sqlstate, hint: e?.hint, message: e?.message ?? String(error) };
    }
    assert.fail("expected a refusal");
  }

  describe("staff under a tenant's aal2 requirement", () => {
    test("/admin/v1: aal1 staff refused (aal2_required) once required, accepted from aal2; audited", async () => {
      const w = await world();
      const reviewer = await staff(w, "reviewer");
      // Not required yet: aal1 is enough.
      assert.equal((await admin(w, reviewer, "GET", "/reviews")).status, 200);

      await requireStaffAal2(db(), { tenant: w.tenant.slug }, true);
      const listed = await admin(w, reviewer, "GET", "/reviews");
      assert.equal(listed.status, 403);
      assert.equal(listed.body.code, "aal2_required");
      const refused = await admin(w, reviewer, "POST", `/releases/${w.releaseId}/reject`, {
        reason: "Cover art",
      });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.code, "aal2_required");
      assert.equal(
        (await rows("select status from public.releases where id = $1", [w.releaseId]))[0]?.status,
        "in_review",
      );
      // A service-role key is a machine credential: not affected.
      assert.equal((await admin(w, "service", "GET", "/reviews")).status, 200);

      await reviewer.upgrade();
      const rejected = await admin(w, reviewer, "POST", `/releases/${w.releaseId}/reject`, {
        reason: "Cover art",
      });
      assert.equal(rejected.status, 200, rejected.text);
      assert.equal(rejected.body.status, "rejected");

      // The decision's audit row: who (the user, at aal2), from where, what.
      const [audit] = await rows<Row>(
        `select actor_type, actor, actor_detail, ip, action, object_table, after from internal.audit_log
         where tenant_id = $1 and object_table = 'internal.release_history' order by id desc limit 1`,
        [w.tenant.id],
      );
      assert.ok(audit);
      assert.equal(audit.actor_type, "user");
      assert.equal(audit.actor, reviewer.id);
      assert.equal((audit.actor_detail as Row).aal, "aal2");
      assert.equal((audit.actor_detail as Row).email, reviewer.email);
      assert.equal(audit.ip, "127.0.0.1");
      assert.equal(audit.action, "insert");
      assert.equal((audit.after as Row).to_status, "rejected");
      assert.equal((audit.after as Row).release_id, w.releaseId);
    });

    test("the database decides: the operator path refuses an aal1 staff caller itself (42501 aal2_required)", async () => {
      const w = await world();
      const reviewer = await staff(w, "reviewer");
      await requireStaffAal2(db(), { tenant: w.tenant.id }, true);
      const claims = { ...decodeJwt(await reviewer.token()), role: "authenticated" } as Claims;
      const r = await refusal(
        operatorScope.run({ claims, tenantId: w.tenant.id, need: "reviewer" }, () =>
          decideReview(db(), w.releaseId, { approve: false, reason: "x" }, { tenantId: w.tenant.id }),
        ),
      );
      assert.deepEqual({ sqlstate: r.sqlstate, hint: r.hint }, { sqlstate: "42501", hint: "aal2_required" });
      // The same claims at aal2 pass the check (the release is then rejected).
      const done = await operatorScope.run(
        { claims: { ...claims, aal: "aal2" }, tenantId: w.tenant.id, need: "reviewer" },
        () => decideReview(db(), w.releaseId, { approve: false, reason: "x" }, { tenantId: w.tenant.id }),
      );
      assert.equal(done.status, "rejected");
    });

    test("/rest/v1: staff read the tenant's releases only from aal2 once required", async () => {
      const w = await world();
      const reviewer = await staff(w, "reviewer");
      assert.equal((await restReleases(w, reviewer)).length, 1, "not required: aal1 reads");
      await requireStaffAal2(db(), { tenant: w.tenant.id }, true);
      assert.deepEqual(await restReleases(w, reviewer), [], "required: aal1 reads nothing");
      await reviewer.upgrade();
      assert.equal((await restReleases(w, reviewer)).length, 1, "aal2 reads");
    });

    test("the platform setting requires aal2 of every tenant's staff", async () => {
      const w = await world();
      const reviewer = await staff(w, "reviewer");
      await requireStaffAal2(db(), { platform: true }, true);
      try {
        assert.equal((await admin(w, reviewer, "GET", "/reviews")).body.code, "aal2_required");
        assert.deepEqual(await restReleases(w, reviewer), []);
      } finally {
        await requireStaffAal2(db(), { platform: true }, false);
      }
      assert.equal((await admin(w, reviewer, "GET", "/reviews")).status, 200);
    });

    test("sensitive acts need aal2 from a person whatever the settings: stores, staff roles, tenant keys", async () => {
      const w = await world();
      const platformAdmin = await staff(w, "admin", true);
      const claims = { ...decodeJwt(await platformAdmin.token()), role: "authenticated" } as Claims;
      const asPerson = <T>(c: Claims, fn: () => Promise<T>) =>
        operatorScope.run({ claims: c, tenantId: w.tenant.id, need: "admin" }, fn);
      const [store] = await rows<{ code: string }>("select code from internal.stores order by code limit 1");
      assert.ok(store);
      const storeRefused = await refusal(
        asPerson(claims, () => configureStore(db(), store.code, { party_id: "PADPIDA1" })),
      );
      assert.equal(storeRefused.sqlstate, "BL024");
      const staffRefused = await refusal(
        asPerson(claims, () =>
          db().asService((tx: Tx) =>
            tx.query("update internal.staff set role = 'admin' where user_id = $1", [platformAdmin.id]),
          ),
        ),
      );
      assert.equal(staffRefused.sqlstate, "BL024");
      const keysRefused = await refusal(
        asPerson(claims, () =>
          db().asService((tx: Tx) =>
            tx.query("update internal.tenants set jwt_secret_sealed = jwt_secret_sealed where id = $1", [
              w.tenant.id,
            ]),
          ),
        ),
      );
      assert.equal(keysRefused.sqlstate, "BL024");
      // At aal2 the same person may (the store change is then undone by the machine path).
      const aal2 = { ...claims, aal: "aal2" };
      await asPerson(aal2, () =>
        db().asService((tx: Tx) =>
          tx.query("update internal.staff set role = 'admin' where user_id = $1", [platformAdmin.id]),
        ),
      );
      // The CLI and service-role keys are machine credentials: no session, not refused.
      await db().asService((tx: Tx) =>
        tx.query("update internal.staff set role = 'admin' where user_id = $1", [platformAdmin.id]),
      );
    });
  });

  describe("an account that requires aal2 of its members", () => {
    test("only its owner, from aal2, sets it; then aal1 members reach none of its rows", async () => {
      const w = await world();
      const owner = await person(w);
      const member = await person(w);
      await rows(
        `insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner'), ($1, $2, $4, 'member')`,
        [w.tenant.id, w.accountId, owner.id, member.id],
      );
      const set = async (who: Person, on: boolean) =>
        db().withRequestContext({ ...decodeJwt(await who.token()), role: "authenticated" } as Claims, (tx) =>
          tx.query("select internal.set_account_require_aal2($1, $2)", [w.accountId, on]),
        );
      assert.equal((await refusal(set(member, true))).sqlstate, "BL023", "a member is not the owner");
      assert.equal((await refusal(set(owner, true))).sqlstate, "BL024", "the owner at aal1");
      await owner.upgrade();
      await set(owner, true);

      assert.deepEqual(await restReleases(w, member), [], "an aal1 member reads nothing of the account");
      assert.equal((await restReleases(w, owner)).length, 1, "the aal2 owner reads");
      await member.upgrade();
      assert.equal((await restReleases(w, member)).length, 1, "the member at aal2 reads");

      // The operator may set it too (a machine credential), and it is audited.
      await runWithAuditScope(cli("auth mfa require-account"), () =>
        requireAccountAal2(db(), w.accountId, false),
      );
      const audited = await rows<Row>(
        `select actor_type, actor, after from internal.audit_log where object_table = 'internal.accounts' and object_id = $1 order by id`,
        [w.accountId],
      );
      assert.deepEqual(
        audited.map((a) => [a.actor_type, a.actor, (a.after as Row).require_aal2]),
        [
          ["user", owner.id, true],
          ["cli", "cli:auth mfa require-account", false],
        ],
      );
    });
  });

  const cli = (command: string): AuditScope => ({
    actor: { type: "cli", id: `cli:${command}`, detail: { os_user: "tester" } },
  });

  describe("the audit log", () => {
    test("a row for each kind of act: staff, an account's admins on keys, members and webhooks, the CLI, MFA", async () => {
      const w = await world();
      const owner = await person(w);
      await rows(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [w.tenant.id, w.accountId, owner.id],
      );
      // An account admin's acts through the public API, with an admin key: a key, a webhook.
      const adminKey = await issueTestKey(db(), { id: w.accountId, tenant_id: w.tenant.id } as Account, {
        scopes: ["keys:manage", "webhooks:manage", "catalog:read"],
      });
      const api = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${app.url}/api/public/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${adminKey.secret}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: res.status, body: (await res.json()) as Row };
      };
      const key = await api("POST", "/api-keys", { name: "ci", account_id: w.accountId });
      const hook = await api("POST", "/webhooks", {
        url: "http://127.0.0.1:9/backline",
        events: ["release.live"],
      });
      // Staff: a delivery reported by the tenant's service-role key through /admin/v1.
      const [store] = await rows<{ code: string }>(
        "select code from internal.stores where enabled order by code limit 1",
      );
      await rows("update public.releases set status = 'delivered' where id = $1", [w.releaseId]);
      const [delivery] = await rows<{ id: string }>(
        `insert into internal.release_deliveries (release_id, account_id, store, status, delivered_at)
         values ($1, $2, $3, 'delivered', now()) returning id`,
        [w.releaseId, w.accountId, store?.code],
      );
      const reported = await admin(w, "service", "POST", `/deliveries/${delivery?.id}/report`, {
        status: "error",
        message: "The store refused the artwork",
      });
      assert.equal(reported.status, 200, reported.text);
      // Staff: a royalty report imported through /admin/v1.
      const imported = await fetch(`${app.url}/admin/v1/royalty-imports?format=backline`, {
        method: "POST",
        headers: { apikey: w.keys.service_role_key, "content-type": "text/csv" },
        body: [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          "2026-04,2026-03,spotify,US,012345000010,QZABC2600001,stream,100,0.4,0.12,0.28,USD",
        ].join("\n"),
      });
      const importBody = (await imported.json()) as Row;
      assert.ok(imported.status < 300, JSON.stringify(importBody));
      // The CLI: a member added, and an MFA reset.
      const other = await person(w);
      await runWithAuditScope(cli("accounts add-member"), () =>
        rows(
          "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'member')",
          [w.tenant.id, w.accountId, other.id],
        ),
      );
      await other.upgrade();
      await runWithAuditScope(cli("auth mfa reset"), () =>
        resetMfa(db(), { tenant: w.tenant.slug, email: other.email, reason: "lost phone" }),
      );

      const log = await rows<Row>(
        "select actor_type, actor, actor_detail, ip, action, object_table, object_id, before, after from internal.audit_log where tenant_id = $1 order by id",
        [w.tenant.id],
      );
      const find = (table: string, action: string) =>
        log.filter((r) => r.object_table === table && r.action === action);
      if (key.status === 201) {
        const k = find("internal.api_keys", "insert").find((r) => r.object_id === key.body.id);
        assert.ok(k, "a key's creation");
        assert.deepEqual([k.actor_type, k.actor], ["api_key", adminKey.id]);
        assert.equal(k.ip, "127.0.0.1");
        assert.ok(!JSON.stringify(k.after).includes("key_hash"), "no hash in the log");
      } else {
        assert.fail(`key not created: ${JSON.stringify(key.body)}`);
      }
      assert.equal(hook.status, 201, JSON.stringify(hook.body));
      const wh = find("internal.webhook_endpoints", "insert").find((r) => r.object_id === hook.body.id);
      assert.ok(wh, "a webhook's creation");
      assert.deepEqual([wh.actor_type, wh.actor], ["api_key", adminKey.id]);
      assert.ok(!JSON.stringify(wh.after).includes("secret_ciphertext"), "no secret in the log");
      const dl = find("internal.release_deliveries", "update")[0];
      assert.ok(dl, "a delivery reported");
      assert.deepEqual(
        [dl.actor_type, dl.actor, (dl.after as Row).status],
        ["service_key", w.tenant.id, "error"],
      );
      const imp = find("internal.royalty_imports", "insert")[0];
      assert.ok(imp, "a royalty import");
      assert.deepEqual(
        [imp.actor_type, imp.actor, imp.object_id],
        ["service_key", w.tenant.id, (importBody.import as Row).id],
      );
      const member = find("internal.memberships", "insert").find((r) => r.actor_type === "cli");
      assert.ok(member, "a member added by the CLI");
      assert.equal(member.actor, "cli:accounts add-member");
      assert.equal((member.actor_detail as Row).os_user, "tester");
      const factor = find("internal.mfa_factors", "insert").find((r) => r.actor === other.id);
      assert.ok(factor, "a factor enrolled");
      assert.ok(!JSON.stringify(factor.after).includes("secret_sealed"));
      const reset = find("internal.users", "mfa.reset")[0];
      assert.ok(reset, "the MFA reset");
      assert.equal(reset.actor, "cli:auth mfa reset");
      assert.equal((reset.after as Row).reason, "lost phone");
      assert.equal((reset.after as Row).factors_removed, 1);
    });

    test("GET /admin/v1/audit: filters, cursor pages, csv and jsonl exports; admins only", async () => {
      const w = await world();
      await rows(
        "insert into internal.organization_settings (tenant_id) values ($1) on conflict do nothing",
        [w.tenant.id],
      );
      for (let i = 0; i < 3; i++) {
        await runWithAuditScope(cli("tenants set-lead-days"), () =>
          rows("update internal.organization_settings set release_lead_days = $2 where tenant_id = $1", [
            w.tenant.id,
            10 + i,
          ]),
        );
      }
      const first = await admin(w, "service", "GET", "/audit?actor=cli:tenants%20set-lead-days&limit=2");
      assert.equal(first.status, 200, first.text);
      const data = first.body.data as Row[];
      assert.equal(data.length, 2);
      assert.equal(first.body.has_more, true);
      assert.deepEqual(
        data.map((r) => (r.after as Row).release_lead_days),
        [12, 11],
        "newest first, only the changed column",
      );
      assert.deepEqual((data[0]?.before as Row | undefined)?.release_lead_days, 11);
      const next = await admin(
        w,
        "service",
        "GET",
        `/audit?actor=cli:tenants%20set-lead-days&limit=2&starting_after=${data[1]?.id}`,
      );
      assert.deepEqual(
        (next.body.data as Row[]).map((r) => (r.after as Row).release_lead_days),
        [10],
      );
      assert.equal(next.body.has_more, false);
      const none = await admin(
        w,
        "service",
        "GET",
        `/audit?from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`,
      );
      assert.deepEqual(none.body.data, []);
      const bad = await admin(w, "service", "GET", "/audit?from=yesterday");
      assert.equal(bad.status, 400);

      const csv = await admin(
        w,
        "service",
        "GET",
        "/audit?format=csv&object_table=internal.organization_settings&actor=cli:tenants%20set-lead-days",
      );
      assert.equal(csv.status, 200);
      assert.match(csv.headers.get("content-type") ?? "", /^text\/csv/);
      const lines = csv.text.trim().split("\r\n");
      assert.equal(
        lines[0],
        "id,at,actor_type,actor,actor_detail,ip,action,object_table,object_id,before,after",
      );
      assert.equal(lines.length, 4);
      const jsonl = await admin(
        w,
        "service",
        "GET",
        "/audit?format=jsonl&object_table=internal.organization_settings&actor=cli:tenants%20set-lead-days",
      );
      const parsed = jsonl.text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Row);
      assert.equal(parsed.length, 3);
      assert.equal(parsed[0]?.actor, "cli:tenants set-lead-days");

      // Another tenant's key sees none of it; staff below admin are refused.
      const other = await world();
      const theirs = await admin(other, "service", "GET", "/audit?actor=cli:tenants%20set-lead-days");
      assert.deepEqual(theirs.body.data, []);
      const reviewer = await staff(w, "reviewer");
      const refused = await admin(w, reviewer, "GET", "/audit");
      assert.equal(refused.status, 403);
      assert.equal(refused.body.code, "insufficient_role");
      const tenantAdmin = await staff(w, "admin");
      assert.equal((await admin(w, tenantAdmin, "GET", "/audit?limit=1")).status, 200);
    });

    test("append-only: no role can update, delete or truncate it, not even the owner", async () => {
      const w = await world();
      await runWithAuditScope(cli("test"), () =>
        rows(
          "insert into internal.organization_settings (tenant_id) values ($1) on conflict (tenant_id) do update set release_lead_days = 3",
          [w.tenant.id],
        ),
      );
      const [row] = await rows<{ id: string }>(
        "select id from internal.audit_log where tenant_id = $1 limit 1",
        [w.tenant.id],
      );
      assert.ok(row);
      const roles: Claims[] = [
        { role: "anon", tenant_id: w.tenant.id },
        { role: "authenticated", sub: randomUUID(), tenant_id: w.tenant.id, aal: "aal2" },
        { role: "tenant_service", tenant_id: w.tenant.id },
        { role: "service_role" },
      ];
      const statements = [
        "update internal.audit_log set actor = 'someone else' where id = $1",
        "delete from internal.audit_log where id = $1",
        "truncate internal.audit_log",
        "insert into internal.audit_log (actor_type, actor, action, object_table) values ('system', 'forged', 'insert', 'x')",
      ];
      for (const claims of roles) {
        for (const sql of statements) {
          const r = await refusal(
            db().withRequestContext(claims, (tx) => tx.query(sql, sql.includes("$1") ? [row.id] : [])),
          );
          assert.equal(r.sqlstate, "42501", `${claims.role}: ${sql}: ${r.message}`);
        }
      }
      // The owner (the role migrations run as, a superuser in these tests): the triggers refuse it.
      for (const sql of statements.slice(0, 3)) {
        const r = await refusal(
          t().owner.transaction((tx) => tx.query(sql, sql.includes("$1") ? [row.id] : []), {
            readOnly: false,
          }),
        );
        assert.equal(r.sqlstate, "42501", `owner: ${sql}: ${r.message}`);
        assert.match(r.message ?? "", /append-only/);
      }
      assert.equal((await rows("select 1 from internal.audit_log where id = $1", [row.id])).length, 1);
    });
  });
});
