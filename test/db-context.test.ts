import assert from "node:assert/strict";
import { test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedAccount, seedTenant, seedUser, userClaims } from "./support/seed.ts";

describeEachEngine("request context", (t) => {
  test("sets the role and the claims for the transaction only", async () => {
    const claims = {
      role: "authenticated" as const,
      sub: "7f1c4a9e-0000-4000-8000-000000000001",
      tenant_id: "7f1c4a9e-0000-4000-8000-000000000002",
    };
    const row = await t().db.withRequestContext(claims, async (tx) => {
      const r = await tx.query<{ role: string; uid: string; tenant: string; jwt_role: string }>(
        "select current_user as role, auth.uid()::text as uid, auth.tenant_id()::text as tenant, auth.role() as jwt_role",
      );
      return r.rows[0];
    });
    assert.deepEqual(row, {
      role: "authenticated",
      uid: claims.sub,
      tenant: claims.tenant_id,
      jwt_role: "authenticated",
    });
    // The next transaction starts clean: the settings were local to the first.
    const after = await t().db.asService(
      async (tx) => (await tx.query<{ uid: string | null }>("select auth.uid()::text as uid")).rows[0],
    );
    assert.equal(after?.uid, null);
  });

  test("refuses a role outside anon, authenticated and service_role", async () => {
    await assert.rejects(
      t().db.withRequestContext({ role: "postgres" as never }, async () => undefined),
      /role must be one of/,
    );
  });

  test("read-only contexts cannot write", async () => {
    const tenant = await seedTenant(t().db);
    const account = await seedAccount(t().db, tenant);
    const user = await seedUser(t().db, tenant, [{ account }]);
    const error = await t()
      .db.withRequestContext(
        userClaims(user),
        (tx) => tx.query("insert into public.artist_profiles (name) values ('Read Only')"),
        { readOnly: true },
      )
      .catch((e: unknown) => e);
    assert.equal(asDbError(error)?.sqlstate, "25006");
  });

  test("an error rolls the whole transaction back", async () => {
    const tenant = await seedTenant(t().db);
    const account = await seedAccount(t().db, tenant);
    const user = await seedUser(t().db, tenant, [{ account }]);
    await assert.rejects(
      t().db.withRequestContext(userClaims(user), async (tx) => {
        await tx.query("insert into public.artist_profiles (name) values ('Rolled Back')");
        await tx.query("select 1/0");
      }),
    );
    const count = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ n: string }>(
            "select count(*) as n from public.artist_profiles where name = 'Rolled Back'",
          )
        ).rows[0]?.n,
    );
    assert.equal(count, "0");
  });

  test("on PostgreSQL the login role is not a superuser and cannot become one", async (ctx) => {
    if (t().kind !== "postgres") return ctx.skip("PGlite's only session user is its superuser");
    const row = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ session_user: string; superuser: boolean }>(
            "select session_user, (select rolsuper from pg_roles where rolname = session_user) as superuser",
          )
        ).rows[0],
    );
    assert.equal(row?.session_user, "authenticator");
    assert.equal(row?.superuser, false);
    const error = await t()
      .db.asService((tx) => tx.query("select set_config('role', 'postgres', true)"))
      .catch((e: unknown) => e);
    assert.equal(asDbError(error)?.sqlstate, "42501");
  });
});
