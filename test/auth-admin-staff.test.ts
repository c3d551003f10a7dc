import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { type SeedUser, type StaffRole, seedStaffUser, seedUser } from "./support/seed.ts";

/**
 * A tenant's service-role key manages its users through GoTrue's admin API, never staff: a person
 * whose sign-in opens /admin/v1 (for that tenant, another, or the whole platform) is managed with
 * `backline staff`. Otherwise tenant A's key could mint a magic link for platform staff and sign
 * in as them (security review), reset their password, ban them or strip their second factor.
 */
describeEachEngine("auth: the admin API never reaches staff", (t) => {
  let app: RunningApp;
  let admin: SupabaseClient;
  let user: SeedUser;
  const staff: [string, SeedUser][] = [];

  before(async () => {
    app = await startApp(t());
    const a = await tenantWithKeys(t());
    const b = await tenantWithKeys(t());
    admin = createClient(app.url, a.keys.service_role_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    user = await seedUser(t().db, a.tenant);
    // Users of tenant A, each holding a staff role somewhere.
    const roles: [string, { of: typeof a.tenant | "platform"; role: StaffRole }][] = [
      ["platform admin", { of: "platform", role: "admin" }],
      ["another tenant's operator", { of: b.tenant, role: "operator" }],
      ["this tenant's reviewer", { of: a.tenant, role: "reviewer" }],
    ];
    for (const [name, role] of roles) staff.push([name, await seedStaffUser(t().db, a.tenant, [role])]);
  });
  after(async () => {
    await app?.close();
  });

  test("listUsers leaves staff out, and counts without them", async () => {
    const { data, error } = await admin.auth.admin.listUsers({ page: 1, perPage: 50 });
    assert.equal(error, null);
    const ids = data.users.map((u) => u.id);
    assert.ok(ids.includes(user.id), "an ordinary user is listed");
    for (const [name, s] of staff) assert.ok(!ids.includes(s.id), `${name} is not listed`);
    assert.equal((data as { total?: number }).total ?? ids.length, ids.length);
  });

  for (const index of [0, 1, 2]) {
    test(`every admin act on staff is 404 user_not_found, and changes nothing (#${index})`, async () => {
      const [name, s] = staff[index] as [string, SeedUser];
      const before = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ row: unknown }>(
              "select row_to_json(u)::text as row from internal.users u where id = $1",
              [s.id],
            )
          ).rows[0]?.row,
      );
      const acts: [string, () => Promise<{ error: { status?: number; code?: string } | null }>][] = [
        ["getUserById", () => admin.auth.admin.getUserById(s.id)],
        [
          "updateUserById password",
          () => admin.auth.admin.updateUserById(s.id, { password: "Taken-Over-9" }),
        ],
        ["updateUserById ban", () => admin.auth.admin.updateUserById(s.id, { ban_duration: "876000h" })],
        ["deleteUser", () => admin.auth.admin.deleteUser(s.id)],
        ["mfa.listFactors", () => admin.auth.admin.mfa.listFactors({ userId: s.id })],
        [
          "generateLink magiclink",
          () => admin.auth.admin.generateLink({ type: "magiclink", email: s.email }),
        ],
        ["generateLink recovery", () => admin.auth.admin.generateLink({ type: "recovery", email: s.email })],
        [
          "generateLink email_change_new",
          () =>
            admin.auth.admin.generateLink({
              type: "email_change_new",
              email: s.email,
              newEmail: `moved-${s.id.slice(0, 8)}@example.com`,
            }),
        ],
      ];
      for (const [act, run] of acts) {
        const { error } = await run();
        assert.ok(error, `${name}: ${act} must fail`);
        assert.deepEqual(
          { status: error.status, code: error.code },
          { status: 404, code: "user_not_found" },
          `${name}: ${act}`,
        );
      }
      const after = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ row: unknown; tokens: string }>(
              `select row_to_json(u)::text as row,
                      (select count(*) from internal.one_time_tokens o where o.user_id = u.id)::text as tokens
                 from internal.users u where id = $1`,
              [s.id],
            )
          ).rows[0],
      );
      assert.equal(after?.row, before, `${name}: the user row is unchanged`);
      assert.equal(after?.tokens, "0", `${name}: no sign-in link was minted`);
    });
  }

  test("an ordinary user of the tenant is still managed (the rule is staff only)", async () => {
    const got = await admin.auth.admin.getUserById(user.id);
    assert.equal(got.error, null);
    const link = await admin.auth.admin.generateLink({ type: "magiclink", email: user.email });
    assert.equal(link.error, null);
    assert.ok(link.data.properties?.hashed_token);
  });
});
