import assert from "node:assert/strict";
import { before, test } from "node:test";
import { erasePerson, exportPerson } from "../src/people/service.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedTenant } from "./support/seed.ts";

/**
 * One person's export and erasure take that person's rows only (security review, High): an
 * address is matched whole — "h@label.co" is not inside "bob.smith@label.com" — the installation's
 * own audit rows are theirs only by their id, and the erasure leaves other tenants' links, jobs and
 * rate counters for the same address alone.
 */
describeEachEngine("people: one person's data, not another's", (t) => {
  let a: Tenant;
  let b: Tenant;
  let h: { id: string; email: string };
  let bob: { id: string; email: string };
  let hInB: { id: string; email: string };

  const q = <T>(sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  const user = async (tenant: Tenant, email: string) =>
    (
      await q<{ id: string; email: string }>(
        "insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at) values ($1, $2, now(), now()) returning id, email",
        [tenant.id, email],
      )
    )[0] as { id: string; email: string };

  before(async () => {
    a = await seedTenant(t().db);
    b = await seedTenant(t().db);
    h = await user(a, "h@label.co");
    bob = await user(a, "bob.smith@label.com");
    hInB = await user(b, "h@label.co");
    // Audit rows naming bob (in tenant A, and the installation's own), and one naming h.
    await q("select internal.audit('test.about_bob', 'internal.users', $1, $2, null, $3)", [
      bob.id,
      a.id,
      JSON.stringify({ contact: bob.email }),
    ]);
    await q("select internal.audit('test.installation', 'internal.tenants', 'x', null, null, $1)", [
      JSON.stringify({ contact: bob.email, also: "h@label.co" }),
    ]);
    await q("select internal.audit('test.about_h', 'internal.users', 'note', $1, null, $2)", [
      a.id,
      JSON.stringify({ note: "wrote to h@label.co today" }),
    ]);
    // Tenant B's pending link and job for its own h@label.co, and a rate counter.
    await q(
      `insert into internal.one_time_tokens (tenant_id, user_id, kind, email, token_hash, otp_hash, expires_at)
       values ($1, $2, 'recovery', 'h@label.co', repeat('a', 64), repeat('b', 64), now() + interval '1 hour')`,
      [b.id, hInB.id],
    );
    await q(`insert into internal.jobs (kind, payload) values ('mail.send', $1)`, [
      JSON.stringify({ tenant_id: b.id, to: "h@label.co" }),
    ]);
    await q(`insert into internal.rate_limits (key, window_start, hits) values ($1, now(), 3)`, [
      `auth:${b.id}:signin_per_email:h@label.co`,
    ]);
  });

  test("h's export holds h's audit row, none of bob's, and no installation row found by address", async () => {
    const doc = (await exportPerson(t().db, a.id, h.id)) as unknown as { audit: { action: string }[] };
    const actions = doc.audit.map((r) => r.action);
    assert.ok(actions.includes("test.about_h"), JSON.stringify(actions));
    assert.ok(!actions.includes("test.about_bob"), "bob's row is not h's");
    assert.ok(!actions.includes("test.installation"), "an installation row is not found by address");
  });

  test("erasing h leaves bob's rows, the installation's rows and tenant B's h alone", async () => {
    const before = await q<{ id: string; after: unknown }>(
      "select id::text, after from internal.audit_log where action in ('test.about_bob', 'test.installation') order by id",
    );
    await erasePerson(t().db, a.id, h.id, "test");
    const after = await q<{ id: string; after: unknown }>(
      "select id::text, after from internal.audit_log where action in ('test.about_bob', 'test.installation') order by id",
    );
    assert.deepEqual(after, before);
    const rewritten = await q<{ after: { note: string } }>(
      "select after from internal.audit_log where action = 'test.about_h'",
    );
    assert.doesNotMatch(JSON.stringify(rewritten), /h@label\.co/);
    const kept = await q<{ tokens: string; jobs: string; limits: string; bob: string }>(
      `select (select count(*) from internal.one_time_tokens where tenant_id = $1)::text as tokens,
              (select count(*) from internal.jobs where payload->>'tenant_id' = $1::text)::text as jobs,
              (select count(*) from internal.rate_limits where key like 'auth:' || $1::text || '%')::text as limits,
              (select email from internal.users where id = $2) as bob`,
      [b.id, bob.id],
    );
    assert.deepEqual(kept, [{ tokens: "1", jobs: "1", limits: "1", bob: "bob.smith@label.com" }]);
  });
});
