import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { addRecoupable, updateMoneySettings } from "../src/money/operator.ts";
import { fileTaxForm, reviewTaxForm, setPayoutMethod } from "../src/money/payees.ts";
import { requestPayout } from "../src/money/payouts.ts";
import { approvePeriod } from "../src/money/statements.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { SecretBox } from "../src/secrets/box.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey } from "./support/public-api.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import {
  anonClaims,
  type SeedUser,
  seedAccount,
  seedTenant,
  seedUser,
  serviceClaims,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The money tables' security (migration 0036, docs/payouts.md "Who sees what"), met directly in SQL
 * as each kind of caller:
 *
 *   tenant 1  account A  track A1 split pat 60 / quinn 40, track A2 without splits (A's own payee);
 *                        an expense; pat asked for a payout of A's money
 *             account B  track B1 split pat 100
 *   tenant 2  account C  track C1 split pat 100 (the same address, another tenant: another payee)
 *
 * Each tenant's report is imported and its month approved, so every table holds rows. A payee
 * sees only their own rows, in every account that pays them; an account's owner, admin and
 * payouts:read key see the account's; a member, a viewer and a key without payouts:read see
 * nothing; another tenant sees nothing; and no client role writes any money table or calls the
 * functions that post to the ledger.
 */

const REPORT = (isrcs: string[]) =>
  [
    "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
    ...isrcs.map((isrc, i) => `2026-11,2026-10,spotify,US,,${isrc},stream,${100 + i},0,0,${12 + i}.5,USD`),
    "",
  ].join("\n");

type Seen = string[] | string;

describeEachEngine("rls: money (migration 0036)", (t) => {
  const callers = new Map<string, Claims>();
  /** Row id (payee, account, tenant) -> a readable label. */
  const labels = new Map<string, string>();
  let tenant1: Tenant;
  let tenant2: Tenant;
  let accounts: Record<"A" | "B" | "C", Account>;
  const payees: Record<string, string> = {};
  let payoutId = "";
  let importA = "";

  before(async () => {
    const db = t().db;
    tenant1 = await seedTenant(db);
    tenant2 = await seedTenant(db);
    accounts = {
      A: await seedAccount(db, tenant1, "A"),
      B: await seedAccount(db, tenant1, "B"),
      C: await seedAccount(db, tenant2, "C"),
    };
    const person = async (tenant: Tenant, email: string): Promise<SeedUser> =>
      db.asService(
        async (tx) =>
          (
            await tx.query<SeedUser>(
              `insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at)
               values ($1, $2, now(), now()) returning id, tenant_id, email`,
              [tenant.id, email],
            )
          ).rows[0] as SeedUser,
      );
    const pat = await person(tenant1, "pat@money.test");
    const quinn = await person(tenant1, "quinn@money.test");
    const patC = await person(tenant2, "pat@money.test");
    const splitTo = (shares: [string, number][]) =>
      JSON.stringify(shares.map(([email, share]) => ({ name: email, email, share })));
    const seedTrack = async (account: Account, upc: string, isrc: string, splits: string | null) => {
      const r = await seedDeliveredRelease(db, account.id, { title: `Release ${isrc}`, upc }, [
        { title: isrc, isrc, duration: 200, track_number: 1 },
      ]);
      if (splits)
        await db.asService((tx) =>
          tx.query("update public.tracks set splits = $2 where id = $1", [r.tracks[0]?.id, splits]),
        );
      return r;
    };
    await seedTrack(
      accounts.A,
      "012345000010",
      "QZMNY2600001",
      splitTo([
        ["pat@money.test", 60],
        ["quinn@money.test", 40],
      ]),
    );
    const releaseA2 = await seedTrack(accounts.A, "012345000027", "QZMNY2600002", null);
    await seedTrack(accounts.B, "012345000034", "QZMNY2600003", splitTo([["pat@money.test", 100]]));
    await seedTrack(accounts.C, "012345000010", "QZMNY2600004", splitTo([["pat@money.test", 100]]));
    await addRecoupable(
      db,
      tenant1.id,
      {
        account_id: accounts.A.id,
        release_id: releaseA2.id,
        kind: "expense",
        currency: "USD",
        amount: "1.00",
        description: "Artwork",
      },
      "test",
    );
    for (const [tenant, isrcs] of [
      [tenant1, ["QZMNY2600001", "QZMNY2600002", "QZMNY2600003"]],
      [tenant2, ["QZMNY2600004"]],
    ] as const) {
      const r = await importRoyalties(db, {
        tenantId: tenant.id,
        format: "backline",
        file: reportFile(REPORT([...isrcs])),
      });
      assert.equal(r.status, "completed");
      if (tenant === tenant1) importA = r.report.id;
    }
    const rows = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string; account_id: string; email: string | null; tenant_id: string }>(
            "select id, account_id, email, tenant_id from internal.payees where tenant_id = any ($1::uuid[])",
            [[tenant1.id, tenant2.id]],
          )
        ).rows,
    );
    const accountLabel = (id: string) =>
      (Object.entries(accounts).find(([, a]) => a.id === id)?.[0] ?? "?") as string;
    for (const p of rows) {
      const label = `${accountLabel(p.account_id)}:${p.email ? (p.email.split("@")[0] as string) : "self"}`;
      payees[label] = p.id;
      labels.set(p.id, label);
    }
    for (const [name, a] of Object.entries(accounts)) labels.set(a.id, name);
    labels.set(tenant1.id, "tenant1");
    labels.set(tenant2.id, "tenant2");
    assert.deepEqual(Object.keys(payees).sort(), [
      "A:pat",
      "A:quinn",
      "A:self",
      "B:pat",
      "B:self",
      "C:pat",
      "C:self",
    ]);

    // Pat asks to be paid A's money; both months approved, so there are statements.
    await updateMoneySettings(db, tenant1.id, { payout_threshold: "1.00" });
    const box = new SecretBox(Buffer.alloc(32, 5));
    await fileTaxForm(db, box, payees["A:pat"] as string, {
      form: "W-9",
      name: "Pat",
      country: "US",
      tax_id: "123-45-6789",
    });
    await reviewTaxForm(db, tenant1.id, payees["A:pat"] as string, { status: "verified" });
    await setPayoutMethod(db, payees["A:pat"] as string, { provider: "paypal", receiver: "pat@money.test" });
    payoutId = (
      await db.withRequestContext({ ...userClaims(pat), aal: "aal2" } as Claims, (tx) =>
        requestPayout(tx, payees["A:pat"] as string),
      )
    ).id;
    const period = await db.asService(
      async (tx) =>
        (await tx.query<{ p: string }>("select to_char(now(), 'YYYY-MM') as p")).rows[0]?.p as string,
    );
    await approvePeriod(db, tenant1.id, period, "test");
    await approvePeriod(db, tenant2.id, period, "test");

    const keyOf = async (account: Account, scopes: string[], role = "member") => {
      const key = await issueTestKey(db, account, { scopes });
      return {
        role: "authenticated",
        tenant_id: account.tenant_id,
        account_id: account.id,
        account_role: role,
        api_key_id: key.id,
      } as Claims;
    };
    const member = async (tenant: Tenant, account: Account, role: "owner" | "admin" | "member" | "viewer") =>
      userClaims(await seedUser(db, tenant, [{ account, role }]));
    callers.set("anon", anonClaims(tenant1));
    callers.set("ownerA", await member(tenant1, accounts.A, "owner"));
    callers.set("adminA", await member(tenant1, accounts.A, "admin"));
    callers.set("memberA", await member(tenant1, accounts.A, "member"));
    callers.set("viewerA", await member(tenant1, accounts.A, "viewer"));
    callers.set("ownerB", await member(tenant1, accounts.B, "owner"));
    callers.set("pat", userClaims(pat));
    callers.set("quinn", userClaims(quinn));
    callers.set("payoutsKeyA", await keyOf(accounts.A, ["payouts:read"]));
    callers.set("catalogKeyA", await keyOf(accounts.A, ["catalog:read", "catalog:write", "royalties:read"]));
    // A key's role claim never stands in for the scope.
    callers.set("adminKeyA", await keyOf(accounts.A, ["catalog:read"], "admin"));
    callers.set("ownerC", await member(tenant2, accounts.C, "owner"));
    callers.set("patC", userClaims(patC));
    // Pat's token with tenant 2's id: neither tenant's money.
    callers.set("tamperedPat", { ...userClaims(pat), tenant_id: tenant2.id });
    callers.set("tenantService1", tenantServiceClaims(tenant1));
    callers.set("tenantService2", tenantServiceClaims(tenant2));
  });

  async function as<T>(caller: string, fn: (tx: Tx) => Promise<T>): Promise<T | string> {
    const claims = caller === "service" ? serviceClaims : callers.get(caller);
    assert.ok(claims, caller);
    try {
      return await t().db.withRequestContext(claims, fn);
    } catch (error) {
      const e = asDbError(error);
      if (e?.sqlstate) return e.sqlstate;
      throw error;
    }
  }

  /** The labels of what `sql` (selecting `k`, a payee, account or tenant id) shows the caller. */
  async function seen(caller: string, sql: string): Promise<Seen> {
    const r = await as(caller, async (tx) => (await tx.query<{ k: string }>(sql)).rows);
    if (typeof r === "string") return r;
    // Each test file has a database of its own: every row is one this suite seeded and labelled.
    return [...new Set(r.map((row) => labels.get(row.k) ?? `unlabelled ${row.k}`))].sort();
  }

  const A_PAYEES = ["A:pat", "A:quinn", "A:self"];
  const TENANT1_PAYEES = [...A_PAYEES, "B:pat", "B:self"];

  // What each caller sees of each payee-keyed table (by the payee each row is about). Ledger entries
  // with entries only: B:self and C:self hold nothing; to a client, only the payee holder's rows.
  const PAYEE_KEYED: Record<string, { sql: string; rows: Record<string, Seen> }> = {};
  const byPayee = (all: string[]) => {
    const keep = (xs: string[]) => xs.filter((x) => all.includes(x));
    return {
      anon: "42501",
      ownerA: keep(A_PAYEES),
      adminA: keep(A_PAYEES),
      memberA: [],
      viewerA: [],
      ownerB: keep(["B:pat", "B:self"]),
      pat: keep(["A:pat", "B:pat"]),
      quinn: keep(["A:quinn"]),
      payoutsKeyA: keep(A_PAYEES),
      catalogKeyA: [],
      adminKeyA: [],
      ownerC: keep(["C:pat", "C:self"]),
      patC: keep(["C:pat"]),
      tamperedPat: [],
      tenantService1: keep(TENANT1_PAYEES),
      tenantService2: keep(["C:pat", "C:self"]),
    } as Record<string, Seen>;
  };
  const ALL = [...TENANT1_PAYEES, "C:pat", "C:self"];
  const WITH_ENTRIES = ["A:pat", "A:quinn", "A:self", "B:pat", "C:pat"];
  PAYEE_KEYED["internal.payees"] = { sql: "select id::text as k from internal.payees", rows: byPayee(ALL) };
  PAYEE_KEYED["public.payees"] = { sql: "select id::text as k from public.payees", rows: byPayee(ALL) };
  PAYEE_KEYED["internal.ledger_entries (payee holder)"] = {
    sql: "select payee_id::text as k from internal.ledger_entries where holder = 'payee'",
    rows: byPayee(WITH_ENTRIES),
  };
  PAYEE_KEYED["public.payee_balances"] = {
    sql: "select payee_id::text as k from public.payee_balances",
    rows: byPayee(WITH_ENTRIES),
  };
  PAYEE_KEYED["internal.statements"] = {
    sql: "select payee_id::text as k from internal.statements",
    rows: byPayee(WITH_ENTRIES),
  };
  PAYEE_KEYED["public.statements"] = {
    sql: "select payee_id::text as k from public.statements",
    rows: byPayee(WITH_ENTRIES),
  };
  PAYEE_KEYED["internal.payouts"] = {
    sql: "select payee_id::text as k from internal.payouts",
    rows: byPayee(["A:pat"]),
  };
  PAYEE_KEYED["public.payouts"] = {
    sql: "select payee_id::text as k from public.payouts",
    rows: byPayee(["A:pat"]),
  };

  describe("who reads which payee's rows", () => {
    for (const [table, { sql, rows }] of Object.entries(PAYEE_KEYED)) {
      for (const [caller, expected] of Object.entries(rows)) {
        test(`${table} as ${caller}: ${typeof expected === "string" ? `fails ${expected}` : expected.join(", ") || "nothing"}`, async () => {
          assert.deepEqual(await seen(caller, sql), expected);
        });
      }
    }
  });

  // The ledger's other holders (store, fees, recoupable, cash, payouts pending): the books, not a
  // payee's, read by the tenant's service key and the operator only.
  describe("the ledger's books (holders other than payees)", () => {
    const expected: Record<string, Seen> = {
      anon: "42501",
      ownerA: [],
      adminA: [],
      memberA: [],
      viewerA: [],
      ownerB: [],
      pat: [],
      quinn: [],
      payoutsKeyA: [],
      catalogKeyA: [],
      adminKeyA: [],
      ownerC: [],
      patC: [],
      tamperedPat: [],
      tenantService1: ["tenant1"],
      tenantService2: ["tenant2"],
    };
    for (const [caller, want] of Object.entries(expected)) {
      test(`as ${caller}: ${typeof want === "string" ? `fails ${want}` : want.join(", ") || "nothing"}`, async () => {
        assert.deepEqual(
          await seen(
            caller,
            "select tenant_id::text as k from internal.ledger_entries where holder <> 'payee'",
          ),
          want,
        );
      });
    }
  });

  // Keyed by account: advances and expenses (the account's managers), split versions and shares
  // (whoever reads the account's catalog: its members and keys, as tracks.splits itself).
  const byAccount: Record<string, { sql: string; rows: Record<string, Seen> }> = {
    "internal.recoupables": {
      sql: "select account_id::text as k from internal.recoupables",
      rows: {
        anon: "42501",
        ownerA: ["A"],
        adminA: ["A"],
        memberA: [],
        viewerA: [],
        ownerB: [],
        pat: [],
        quinn: [],
        payoutsKeyA: ["A"],
        catalogKeyA: [],
        adminKeyA: [],
        ownerC: [],
        patC: [],
        tamperedPat: [],
        tenantService1: ["A"],
        tenantService2: [],
      },
    },
    "internal.split_versions": {
      sql: "select account_id::text as k from internal.split_versions",
      rows: {
        anon: "42501",
        ownerA: ["A"],
        adminA: ["A"],
        memberA: ["A"],
        viewerA: ["A"],
        ownerB: ["B"],
        pat: [],
        quinn: [],
        payoutsKeyA: ["A"],
        catalogKeyA: ["A"],
        adminKeyA: ["A"],
        ownerC: ["C"],
        patC: [],
        tamperedPat: [],
        tenantService1: ["A", "B"],
        tenantService2: ["C"],
      },
    },
    "internal.split_shares": {
      sql: "select v.account_id::text as k from internal.split_shares s join internal.split_versions v on v.id = s.version_id",
      rows: {
        anon: "42501",
        ownerA: ["A"],
        adminA: ["A"],
        memberA: ["A"],
        viewerA: ["A"],
        ownerB: ["B"],
        pat: [],
        quinn: [],
        payoutsKeyA: ["A"],
        catalogKeyA: ["A"],
        adminKeyA: ["A"],
        ownerC: ["C"],
        patC: [],
        tamperedPat: [],
        tenantService1: ["A", "B"],
        tenantService2: ["C"],
      },
    },
  };
  // The operator's settings and records: no client reads them, a tenant's service key its tenant's.
  for (const table of [
    "money_settings",
    "distribution_fees",
    "money_periods",
    "exchange_rates",
    "payout_batches",
  ]) {
    const rows: Record<string, Seen> = {};
    for (const caller of Object.keys(byPayee([]))) rows[caller] = "42501";
    rows.tenantService1 =
      table === "distribution_fees" || table === "exchange_rates" || table === "payout_batches"
        ? []
        : ["tenant1"];
    rows.tenantService2 = table === "money_periods" ? ["tenant2"] : [];
    byAccount[`internal.${table}`] = { sql: `select tenant_id::text as k from internal.${table}`, rows };
  }

  describe("who reads the account's and the operator's records", () => {
    for (const [table, { sql, rows }] of Object.entries(byAccount)) {
      for (const [caller, expected] of Object.entries(rows)) {
        test(`${table} as ${caller}: ${typeof expected === "string" ? `fails ${expected}` : expected.join(", ") || "nothing"}`, async () => {
          assert.deepEqual(await seen(caller, sql), expected);
        });
      }
    }
  });

  // The sealed tax id is never granted, not even to the payee; its last four characters are.
  test("the payee reads their tax form's last four characters, never the sealed tax id", async () => {
    assert.equal(await as("pat", (tx) => tx.query("select tax_id_sealed from internal.payees")), "42501");
    const last4 = await as(
      "pat",
      async (tx) =>
        (
          await tx.query<{ l: string }>("select tax_id_last4 as l from internal.payees where id = $1", [
            payees["A:pat"],
          ])
        ).rows,
    );
    assert.deepEqual(last4, [{ l: "6789" }]);
  });

  // Writes: every money table and view, as every client role, refused for want of the privilege.
  const TABLES = [
    "money_settings",
    "distribution_fees",
    "payees",
    "split_versions",
    "split_shares",
    "money_periods",
    "exchange_rates",
    "recoupables",
    "payout_batches",
    "payouts",
    "ledger_entries",
    "statements",
  ];
  const VIEWS = ["payees", "payee_balances", "statements", "payouts"];
  const CLIENTS = () => [...callers.keys()];

  describe("no client role writes a money table or view", () => {
    const writes = [
      ...TABLES.flatMap((t) => [
        `insert into internal.${t} default values`,
        `update internal.${t} set tenant_id = tenant_id`.replace(
          "split_shares set tenant_id = tenant_id",
          "split_shares set share = share",
        ),
        `delete from internal.${t}`,
      ]),
      ...VIEWS.flatMap((v) => [
        `insert into public.${v} default values`,
        `update public.${v} set account_id = account_id`,
        `delete from public.${v}`,
      ]),
    ];
    for (const sql of writes) {
      test(sql, async () => {
        const outcomes: Record<string, string> = {};
        for (const caller of CLIENTS()) {
          const r = await as(caller, async (tx) => {
            const result = await tx.query(sql);
            throw Object.assign(new Error("rollback"), { rows: result.rowCount });
          }).catch((e: { rows?: number }) => `wrote ${e.rows}`);
          outcomes[caller] = String(r);
        }
        // An aggregate view is not updatable at all (55000); every other write lacks the privilege.
        const refusal = sql.includes("payee_balances") ? "55000" : "42501";
        assert.deepEqual(
          outcomes,
          Object.fromEntries(CLIENTS().map((c) => [c, refusal])),
          "every client is refused",
        );
      });
    }
  });

  // The functions that post to the ledger or create money rows are the operator's (or run inside
  // the database's own functions); a client calling them directly is refused.
  describe("no client role calls the money functions that write", () => {
    const calls: [
      string,
      (ids: { payee: string; account: string; tenant: string; imp: string; payout: string }) => string,
    ][] = [
      ["allocate_import", (x) => `select internal.allocate_import('${x.imp}')`],
      ["reverse_allocation", (x) => `select internal.reverse_allocation('${x.imp}')`],
      ["record_recoupable", () => "select internal.record_recoupable(gen_random_uuid())"],
      ["settle_payout", (x) => `select internal.settle_payout('${x.payout}', 'paid')`],
      [
        "convert_payee_period",
        (x) => `select internal.convert_payee_period('${x.payee}', date_trunc('month', now())::date)`,
      ],
      [
        "add_split_version",
        () => "select internal.add_split_version(gen_random_uuid(), now()::date, null, null, '[]')",
      ],
      ["account_payee", (x) => `select internal.account_payee('${x.account}')`],
      ["posting_period", (x) => `select internal.posting_period('${x.tenant}')`],
      ["payee_balance", (x) => `select internal.payee_balance('${x.payee}', 'USD')`],
      ["fee_rate", (x) => `select internal.fee_rate('${x.tenant}', '${x.account}', null)`],
      ["tenant_currency", (x) => `select internal.tenant_currency('${x.tenant}')`],
    ];
    for (const [name, sql] of calls) {
      test(`internal.${name}`, async () => {
        const ids = {
          payee: payees["A:quinn"] as string,
          account: accounts.A.id,
          tenant: tenant1.id,
          imp: importA,
          payout: payoutId,
        };
        const outcomes: Record<string, string> = {};
        for (const caller of CLIENTS()) {
          const r = await as(caller, async (tx) => {
            await tx.query(sql(ids));
            throw Object.assign(new Error("rollback"), { ok: true });
          }).catch((e: { ok?: boolean }) => (e.ok ? "ran" : String(e)));
          outcomes[caller] = String(r);
        }
        assert.deepEqual(outcomes, Object.fromEntries(CLIENTS().map((c) => [c, "42501"])));
      });
    }
  });

  // A payout object is read as the payouts table is: the payee's own and the account's managers'.
  test("internal.payout_object answers only whoever may read the payout", async () => {
    const outcomes: Record<string, string> = {};
    for (const caller of CLIENTS()) {
      const r = await as(caller, async (tx) => {
        const o = (
          await tx.query<{ o: { id: string } | null }>("select internal.payout_object($1) as o", [payoutId])
        ).rows[0]?.o;
        return o ? "read" : "nothing";
      });
      outcomes[caller] = String(r);
    }
    const readers = new Set(["ownerA", "adminA", "pat", "payoutsKeyA", "tenantService1"]);
    assert.deepEqual(
      outcomes,
      Object.fromEntries(
        CLIENTS().map((c) => [c, c === "anon" ? "42501" : readers.has(c) ? "read" : "nothing"]),
      ),
    );
  });

  // Requesting a payout is the payee's own act: not another person, not a key, not another tenant.
  test("public.request_payout: only the payee themself", async () => {
    const attempt = (caller: string, payee: string) =>
      as(caller, async (tx) => {
        await tx.query("select public.request_payout($1)", [payee]);
        return "requested";
      });
    const quinnPayee = payees["A:quinn"] as string;
    assert.equal(await attempt("anon", quinnPayee), "42501");
    for (const caller of ["ownerA", "adminA", "pat", "ownerC", "patC", "tamperedPat"]) {
      assert.equal(await attempt(caller, quinnPayee), "P0002", caller);
    }
    for (const caller of ["payoutsKeyA", "catalogKeyA"]) {
      assert.equal(await attempt(caller, quinnPayee), "42501", caller);
    }
    assert.equal(await attempt("tenantService1", quinnPayee), "42501");
  });
});
