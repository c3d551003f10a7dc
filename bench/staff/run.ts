// What staff roles cost (migration 0019, src/admin/auth.ts, src/db/operator-scope.ts), on each
// engine, side by side in one run:
//
// 1. an operator transaction (`Db.asService`, one `select 1`) outside an /admin/v1 request
//    against the same inside the operator scope, where it first runs internal.require_staff for
//    a tenant's service key and for a staff user (sequential, BENCH_TX transactions each);
// 2. GET /admin/v1/reviews (a queue of 50 releases) over HTTP with the tenant's service-role key
//    against a staff reviewer's access token (whose role the hook also reads from the database),
//    loaded by autocannon.
//
//   node bench/staff/run.ts                                   # the embedded database
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node bench/staff/run.ts   # and PostgreSQL
//
// Options (environment): BENCH_DURATION (s per measurement, default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ROUNDS (default 2), BENCH_TX (default 2000).
import type { Db } from "../../src/db/db.ts";
import { operatorScope } from "../../src/db/operator-scope.ts";
import type { Claims } from "../../src/db/types.ts";
import { startApp, tenantWithKeys } from "../../test/support/app.ts";
import { createTestDb, ENGINES } from "../../test/support/db.ts";
import { keyedAccount } from "../../test/support/public-api.ts";
import { seedStaffUser, userToken } from "../../test/support/seed.ts";
import { average, load, type Measure, ROUNDS } from "../support.ts";

const TX = Number(process.env.BENCH_TX ?? 2000);

async function perTransaction(
  db: Db,
  scope: Parameters<typeof operatorScope.run>[0] | undefined,
): Promise<number> {
  const one = () => db.asService((tx) => tx.query("select 1"));
  const run = async () => {
    for (let i = 0; i < TX; i++) await one();
  };
  for (let i = 0; i < 200; i++) await (scope ? operatorScope.run(scope, one) : one());
  const start = process.hrtime.bigint();
  await (scope ? operatorScope.run(scope, run) : run());
  return Number(process.hrtime.bigint() - start) / 1000 / TX;
}

const fmt = (m: Measure) => `${m.rps.toFixed(0)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, errors ${m.errors}`;

for (const kind of ENGINES) {
  const t = await createTestDb(kind);
  try {
    const { tenant, keys } = await tenantWithKeys(t, {
      settings: { public_api_rate_limit: { max: 100_000_000, windowSeconds: 1 } },
    });
    // 50 releases waiting for review (submitted straight on the service path).
    const { account } = await keyedAccount(t.db, { tenant });
    await t.db.asService(async (tx) => {
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
          [account.id],
        )
      ).rows[0]?.id;
      for (let i = 0; i < 50; i++) {
        await tx.query(
          "insert into public.releases (artist_id, title, status) values ($1, $2, 'in_review')",
          [artist, `Bench ${i}`],
        );
      }
    });
    const user = await seedStaffUser(t.db, tenant, [{ of: tenant, role: "reviewer" }]);
    const staffClaims: Claims = { role: "authenticated", sub: user.id, tenant_id: tenant.id };
    const keyClaims: Claims = { role: "tenant_service", tenant_id: tenant.id };

    const plain = await perTransaction(t.db, undefined);
    const asKey = await perTransaction(t.db, { claims: keyClaims, tenantId: tenant.id, need: "reviewer" });
    const asStaff = await perTransaction(t.db, {
      claims: staffClaims,
      tenantId: tenant.id,
      need: "reviewer",
    });
    console.log(`[${kind}] one operator transaction (select 1), ${TX} sequential:`);
    console.log(`  outside a request           ${plain.toFixed(0)} µs`);
    console.log(`  checked, service-role key   ${asKey.toFixed(0)} µs (+${(asKey - plain).toFixed(0)})`);
    console.log(`  checked, staff user         ${asStaff.toFixed(0)} µs (+${(asStaff - plain).toFixed(0)})`);

    const app = await startApp(t);
    try {
      const token = await userToken(t.db, tenant, user, `${app.url}/auth/v1`);
      const url = `${app.url}/admin/v1/reviews`;
      const service = { apikey: keys.service_role_key };
      const staff = { apikey: keys.anon_key, authorization: `Bearer ${token}` };
      for (const [name, headers] of [
        ["service", service],
        ["staff", staff],
      ] as const) {
        const res = await fetch(url, { headers });
        const body = (await res.json()) as { data?: unknown[] };
        if (res.status !== 200 || body.data?.length !== 50) throw new Error(`${name}: ${res.status}`);
      }
      const bySide: Record<"service" | "staff", Measure[]> = { service: [], staff: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? (["service", "staff"] as const) : (["staff", "service"] as const);
        for (const side of order) bySide[side].push(await load(url, side === "service" ? service : staff));
      }
      console.log(`[${kind}] GET /admin/v1/reviews (50 releases):`);
      console.log(`  service-role key   ${fmt(average(bySide.service))}`);
      console.log(`  staff reviewer     ${fmt(average(bySide.staff))}`);
    } finally {
      await app.close();
    }
  } finally {
    // The embedded engine's thread keeps nothing alive while idle: hold the process until it closed.
    const hold = setInterval(() => undefined, 1000);
    await t.close();
    clearInterval(hold);
  }
}
