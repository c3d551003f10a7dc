import assert from "node:assert/strict";
import { before, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey } from "./support/public-api.ts";
import {
  anonClaims,
  seedAccount,
  seedTenant,
  seedUser,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The database-level security of migration 0009 (webhooks), met directly in SQL as each kind of
 * caller: who sees and changes an account's endpoints, deliveries, attempts and events, and that
 * no client can read a secret's ciphertext. Writes run in transactions that are rolled back.
 */

type Outcome = number | "denied";

describeEachEngine("rls: webhooks (migration 0009)", (t) => {
  const callers = new Map<string, Claims>();
  const ids = { endpointA: "", endpointB: "", royaltiesA: "", accountA: "", accountB: "", deliveryA: "" };

  before(async () => {
    const db = t().db;
    const tenant = await seedTenant(db);
    const other = await seedTenant(db);
    const a = await seedAccount(db, tenant, "A");
    const b = await seedAccount(db, tenant, "B");
    const c = await seedAccount(db, other, "C");
    ids.accountA = a.id;
    ids.accountB = b.id;
    const keyOf = async (scopes: string[]) => {
      const key = await issueTestKey(db, a, { scopes });
      return {
        role: "authenticated",
        tenant_id: tenant.id,
        account_id: a.id,
        account_role: "member",
        api_key_id: key.id,
      } as Claims;
    };
    callers.set("ownerA", userClaims(await seedUser(db, tenant, [{ account: a, role: "owner" }])));
    callers.set("adminA", userClaims(await seedUser(db, tenant, [{ account: a, role: "admin" }])));
    callers.set("memberA", userClaims(await seedUser(db, tenant, [{ account: a, role: "member" }])));
    callers.set("ownerB", userClaims(await seedUser(db, tenant, [{ account: b, role: "owner" }])));
    callers.set("ownerC", userClaims(await seedUser(db, other, [{ account: c, role: "owner" }])));
    // Release events need catalog:read to be managed, royalty events royalties:read (migration 0013).
    callers.set("hookKeyA", await keyOf(["webhooks:manage", "catalog:read"]));
    callers.set("hookOnlyKeyA", await keyOf(["webhooks:manage"]));
    callers.set("royaltyHookKeyA", await keyOf(["webhooks:manage", "royalties:read"]));
    callers.set("fullHookKeyA", await keyOf(["webhooks:manage", "catalog:read", "royalties:read"]));
    callers.set("catalogKeyA", await keyOf(["catalog:read", "catalog:write"]));
    callers.set("anon", anonClaims(tenant));
    callers.set("tenantService", tenantServiceClaims(tenant));

    await db.asService(async (tx) => {
      for (const [account, key] of [
        [a, "endpointA"],
        [b, "endpointB"],
      ] as const) {
        const e = await tx.query<{ id: string }>(
          `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
           values ($1, 'https://hooks.example.com/x', '{release.live}', 'v1.x.y.z') returning id`,
          [account.id],
        );
        ids[key] = (e.rows[0] as { id: string }).id;
        await tx.query(
          `insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, 'release.live', '{"object": {}}')`,
          [tenant.id, account.id],
        );
      }
      const r = await tx.query<{ id: string }>(
        `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
         values ($1, 'https://hooks.example.com/revenue', '{royalties.imported}', 'v1.r.s.t') returning id`,
        [a.id],
      );
      ids.royaltiesA = (r.rows[0] as { id: string }).id;
      await tx.query(
        `insert into internal.webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, outcome)
         select id, endpoint_id, 1, now(), 5, 'timeout' from internal.webhook_deliveries`,
      );
      const d = await tx.query<{ id: string }>(
        "select id from internal.webhook_deliveries where endpoint_id = $1 limit 1",
        [ids.endpointA],
      );
      ids.deliveryA = (d.rows[0] as { id: string }).id;
    });
  });

  /** Runs `sql` as `caller` and rolls back: the row count, or "denied" for a permission error. */
  async function as(caller: string, sql: string, params: unknown[] = []): Promise<Outcome> {
    const claims = callers.get(caller);
    assert.ok(claims, caller);
    let outcome: Outcome = "denied";
    try {
      await t().db.withRequestContext(claims, async (tx: Tx) => {
        outcome = (await tx.query(sql, params)).rowCount;
        throw new Error("rollback");
      });
    } catch (error) {
      if (error instanceof Error && error.message === "rollback") return outcome;
      const db = asDbError(error);
      if (db?.sqlstate === "42501") return "denied";
      throw error;
    }
    return outcome;
  }

  const ALL = [
    "ownerA",
    "adminA",
    "memberA",
    "ownerB",
    "ownerC",
    "hookKeyA",
    "catalogKeyA",
    "anon",
    "tenantService",
  ];
  const MANAGERS_OF_A = new Set(["ownerA", "adminA", "hookKeyA"]);
  const NO_GRANT = new Set(["anon", "tenantService"]);
  const expectFor = (caller: string, whenManager: Outcome, otherwise: Outcome): Outcome =>
    NO_GRANT.has(caller) ? "denied" : MANAGERS_OF_A.has(caller) ? whenManager : otherwise;

  const cases: {
    what: string;
    sql: () => string;
    params: () => unknown[];
    manager: Outcome;
    other: Outcome;
  }[] = [
    {
      what: "read A's endpoint",
      sql: () => "select id, url, events from internal.webhook_endpoints where id = $1",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      what: "read A's deliveries",
      sql: () => "select id, status from internal.webhook_deliveries where endpoint_id = $1",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      what: "read A's attempts",
      sql: () => "select id, outcome from internal.webhook_attempts where endpoint_id = $1",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      // The events are the server's (migration 0030): no request role reads them, managers neither.
      what: "read A's events",
      sql: () => "select id from internal.events where account_id = $1",
      params: () => [ids.accountA],
      manager: "denied",
      other: "denied",
    },
    {
      // What the delivery log shows of an event: its type, for a delivery the caller may see.
      what: "read the event type of A's deliveries",
      sql: () =>
        "select internal.delivery_event_type(id) from internal.webhook_deliveries where endpoint_id = $1 and internal.delivery_event_type(id) is not null",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      // Named by its id, the function still answers only for a delivery the caller may see.
      what: "read the event type of A's delivery by its id",
      sql: () => "select 1 where internal.delivery_event_type($1::uuid) is not null",
      params: () => [ids.deliveryA],
      manager: 1,
      other: 0,
    },
    {
      what: "update A's endpoint",
      sql: () => "update internal.webhook_endpoints set enabled = false where id = $1",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      what: "delete A's endpoint",
      sql: () => "delete from internal.webhook_endpoints where id = $1",
      params: () => [ids.endpointA],
      manager: 1,
      other: 0,
    },
    {
      what: "read or change B's endpoint",
      sql: () => "update internal.webhook_endpoints set enabled = false where id = $1",
      params: () => [ids.endpointB],
      manager: 0,
      other: 0,
    },
  ];

  for (const c of cases) {
    test(`${c.what}: only A's owners, admins and a key with webhooks:manage`, async () => {
      const got: Record<string, Outcome> = {};
      const want: Record<string, Outcome> = {};
      for (const caller of ALL) {
        got[caller] = await as(caller, c.sql(), c.params());
        want[caller] = expectFor(caller, c.manager, c.other);
      }
      // ownerB manages B: for B's endpoint it is a manager.
      if (c.what.startsWith("read or change B")) want.ownerB = 1;
      assert.deepEqual(got, want);
    });
  }

  test("register for A: its managers may, nobody else; the tenant comes from the account", async () => {
    const sql = `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
                 values ($1, 'https://hooks.example.com/y', '{release.live}', 'v1.a.b.c')`;
    const got: Record<string, Outcome> = {};
    for (const caller of ALL) got[caller] = await as(caller, sql, [ids.accountA]);
    assert.deepEqual(got, {
      ownerA: 1,
      adminA: 1,
      memberA: "denied",
      ownerB: "denied",
      ownerC: "denied",
      hookKeyA: 1,
      catalogKeyA: "denied",
      anon: "denied",
      tenantService: "denied",
    });
  });

  test("no client reads a secret's ciphertext, not even the endpoint's managers", async () => {
    for (const caller of ["ownerA", "adminA", "hookKeyA"]) {
      for (const column of ["secret_ciphertext", "previous_secret_ciphertext"]) {
        assert.equal(
          await as(caller, `select ${column} from internal.webhook_endpoints where id = $1`, [ids.endpointA]),
          "denied",
          `${caller} reading ${column}`,
        );
      }
      assert.equal(
        await as(caller, "select * from internal.webhook_endpoints"),
        "denied",
        `${caller}: select *`,
      );
    }
  });

  test("clients cannot make deliveries or attempts, or mark a delivery succeeded by hand", async () => {
    for (const caller of ["ownerA", "hookKeyA"]) {
      assert.equal(
        await as(
          caller,
          // The events are not readable to a client (migration 0030): an invented event id.
          "insert into internal.webhook_deliveries (endpoint_id, event_id, account_id) values ($1, gen_random_uuid(), $2)",
          [ids.endpointA, ids.accountA],
        ),
        "denied",
      );
      assert.equal(
        await as(
          caller,
          "update internal.webhook_deliveries set completed_at = now() where endpoint_id = $1",
          [ids.endpointA],
        ),
        "denied",
      );
      assert.equal(
        await as(caller, "delete from internal.webhook_attempts where endpoint_id = $1", [ids.endpointA]),
        "denied",
      );
    }
  });
  /** Runs `sql` as `caller` and rolls back: the first row's first value or the row count, or the SQLSTATE. */
  async function attempt(caller: string, sql: string, params: unknown[] = []): Promise<unknown> {
    const claims = callers.get(caller);
    assert.ok(claims, caller);
    let value: unknown;
    try {
      await t().db.withRequestContext(claims, async (tx: Tx) => {
        const r = await tx.query<Record<string, unknown>>(sql, params);
        value = r.rows[0] ? Object.values(r.rows[0])[0] : r.rowCount;
        throw new Error("rollback");
      });
    } catch (error) {
      if (error instanceof Error && error.message === "rollback") return value;
      const db = asDbError(error);
      if (db) return db.sqlstate;
      throw error;
    }
    return value;
  }

  // Issue 26: a key that may only manage webhooks must not point an endpoint carrying the
  // account's revenue (or its catalog) at itself. Every change needs the read scopes of every
  // event the endpoint carries, before and after the change.
  const NO_SCOPE = "BL014";
  const KEYS = ["hookOnlyKeyA", "hookKeyA", "royaltyHookKeyA", "fullHookKeyA", "ownerA"] as const;
  const scopeCases: { what: string; sql: string; params: () => unknown[]; want: unknown[] }[] = [
    {
      what: "change the URL of the royalties endpoint",
      sql: "update internal.webhook_endpoints set url = 'https://attacker.example.net/' where id = $1",
      params: () => [ids.royaltiesA],
      want: [NO_SCOPE, NO_SCOPE, 1, 1, 1],
    },
    {
      what: "disable the royalties endpoint",
      sql: "update internal.webhook_endpoints set enabled = false where id = $1",
      params: () => [ids.royaltiesA],
      want: [NO_SCOPE, NO_SCOPE, 1, 1, 1],
    },
    {
      what: "delete the royalties endpoint",
      sql: "delete from internal.webhook_endpoints where id = $1",
      params: () => [ids.royaltiesA],
      want: [NO_SCOPE, NO_SCOPE, 1, 1, 1],
    },
    {
      what: "rotate the royalties endpoint's secret",
      sql: "select internal.rotate_webhook_secret($1, 'v1.n.e.w', 0)",
      params: () => [ids.royaltiesA],
      want: [NO_SCOPE, NO_SCOPE, true, true, true],
    },
    {
      what: "change the URL of a release endpoint",
      sql: "update internal.webhook_endpoints set url = 'https://attacker.example.net/' where id = $1",
      params: () => [ids.endpointA],
      want: [NO_SCOPE, 1, NO_SCOPE, 1, 1],
    },
    {
      what: "add royalties.imported to a release endpoint",
      sql: "update internal.webhook_endpoints set events = '{release.live,royalties.imported}' where id = $1",
      params: () => [ids.endpointA],
      want: [NO_SCOPE, NO_SCOPE, NO_SCOPE, 1, 1],
    },
    {
      what: "drop royalties.imported from the royalties endpoint for a release event",
      sql: "update internal.webhook_endpoints set events = '{release.live}' where id = $1",
      params: () => [ids.royaltiesA],
      want: [NO_SCOPE, NO_SCOPE, NO_SCOPE, 1, 1],
    },
    {
      what: "register a royalties endpoint",
      sql: `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
            values ($1, 'https://attacker.example.net/', '{royalties.imported}', 'v1.a.b.c')`,
      params: () => [ids.accountA],
      want: [NO_SCOPE, NO_SCOPE, 1, 1, 1],
    },
    {
      what: "register a release endpoint",
      sql: `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
            values ($1, 'https://attacker.example.net/', '{release.live}', 'v1.a.b.c')`,
      params: () => [ids.accountA],
      want: [NO_SCOPE, 1, NO_SCOPE, 1, 1],
    },
    {
      what: "rotate B's endpoint's secret",
      sql: "select internal.rotate_webhook_secret($1, 'v1.n.e.w', 0)",
      params: () => [ids.endpointB],
      want: [false, false, false, false, false],
    },
  ];
  for (const c of scopeCases) {
    test(`${c.what}: needs the read scope of every event carried`, async () => {
      const got: Record<string, unknown> = {};
      const want: Record<string, unknown> = {};
      for (const [i, caller] of KEYS.entries()) {
        got[caller] = await attempt(caller, c.sql, c.params());
        want[caller] = c.want[i];
      }
      assert.deepEqual(got, want);
    });
  }

  test("rotate_webhook_secret: only the endpoint's managers; anon and the tenant's service key have no grant", async () => {
    const sql = "select internal.rotate_webhook_secret($1, 'v1.n.e.w', 24)";
    const got: Record<string, unknown> = {};
    for (const caller of [
      "ownerA",
      "adminA",
      "memberA",
      "ownerB",
      "ownerC",
      "catalogKeyA",
      "anon",
      "tenantService",
    ]) {
      got[caller] = await attempt(caller, sql, [ids.endpointA]);
    }
    assert.deepEqual(got, {
      ownerA: true,
      adminA: true,
      memberA: false,
      ownerB: false,
      ownerC: false,
      catalogKeyA: false,
      anon: "42501",
      tenantService: "42501",
    });
    const [row] = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ secret_ciphertext: string }>(
            "select secret_ciphertext from internal.webhook_endpoints where id = $1",
            [ids.endpointA],
          )
        ).rows,
    );
    assert.equal(row?.secret_ciphertext, "v1.x.y.z", "every attempt rolled back");
  });

  // Migration 0059: the dispatcher's claim is one function, run as its caller; only service_role
  // may call it, so no client can lease (and so hold back) anyone's deliveries.
  test("claim_webhook_deliveries: the dispatcher's (service_role) alone; no client may call it", async () => {
    const sql = `select count(*) from internal.claim_webhook_deliveries('someone', null, '{}', '{}', '{}', 10, 50, 60000)`;
    const got: Record<string, unknown> = {};
    for (const caller of ["ownerA", "hookKeyA", "fullHookKeyA", "anon", "tenantService"]) {
      got[caller] = await attempt(caller, sql);
    }
    assert.deepEqual(got, {
      ownerA: "42501",
      hookKeyA: "42501",
      fullHookKeyA: "42501",
      anon: "42501",
      tenantService: "42501",
    });
    // As the service it leases A's and B's due deliveries (one each), rolled back here.
    let claimed: { endpoint_id: string; locked_by: string | null }[] = [];
    await t()
      .db.asService(async (tx) => {
        await tx.query(
          `select id from internal.claim_webhook_deliveries('someone', null, '{}', '{}', '{}', 10, 50, 60000)`,
        );
        claimed = (
          await tx.query<{ endpoint_id: string; locked_by: string | null }>(
            "select endpoint_id, locked_by from internal.webhook_deliveries where endpoint_id = any ($1::uuid[])",
            [[ids.endpointA, ids.endpointB]],
          )
        ).rows;
        throw new Error("rollback");
      })
      .catch((error: unknown) => {
        if (!(error instanceof Error && error.message === "rollback")) throw error;
      });
    assert.deepEqual(claimed.map((c) => c.locked_by).sort(), ["someone", "someone"]);
  });
});
