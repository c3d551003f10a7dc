import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { before, describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { type Account, createAccount, type Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  anonClaims,
  forceReleaseStatus,
  keyClaims,
  type SeedUser,
  seedAccount,
  seedTenant,
  seedUser,
  serviceClaims,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The database-level security of migration 0007 (the public API's ground), met directly in SQL as
 * each kind of caller, on every engine: the validation catalogues, API keys, idempotency records,
 * per-store delivery states, Official Artist Channel requests, release_problems,
 * correct_release_metadata, the replaced release deletion rule and release_lead_days. One world
 * is seeded per engine:
 *
 *   tenant 1 (account-members)  account A  ownerA, adminA, memberA, viewerA; keys of A in every status
 *                               account B  memberB
 *                               account S  ownerS (a sandbox account)
 *   tenant 2 (account-members)  account C  ownerC
 *   tenant 3 (owner-only)       account O  memberO1, memberO2 (each with an artist and a delivered
 *                                          release), viewerO
 *
 * Every write that is not the subject of a later check runs in its own transaction and is rolled
 * back, so the cases stay independent; the few sequences (key creation, an OAC request, a
 * metadata correction, the lead time) commit and say so.
 */

// ---------------------------------------------------------------------------------------------
// Callers and outcomes
// ---------------------------------------------------------------------------------------------

const CALLERS = [
  "anon", // tenant 1's anon key
  "ownerA", // owner of account A
  "adminA", // admin of account A
  "memberA", // member of account A
  "viewerA", // viewer of account A
  "memberB", // member of account B, same tenant
  "ownerS", // owner of the sandbox account S, same tenant
  "ownerC", // owner of account C in tenant 2
  "tamperedOwnerA", // ownerA's token with tenant_id naming tenant 2
  "adminKeyA", // A's active public-API key, with every scope (account_role admin)
  "keyA", // a public-API key of A with catalog:write (account_role member)
  "viewerKeyA", // a public-API key of A with account_role viewer
  "memberO1", // member of account O (owner-only tenant 3)
  "memberO2", // another member of account O
  "viewerO", // viewer of account O
  "keyO", // a public-API key of O
  "tenantService1", // tenant 1's service-role key (tenant_service)
  "tenantService2", // tenant 2's
  "tenantServiceO", // tenant 3's
  "service", // service_role, the operator
] as const;
type Caller = (typeof CALLERS)[number];

/** Every caller but the operator. */
const CLIENTS = CALLERS.filter((c) => c !== "service");

/** Missing privilege (table or column grant), or an RLS WITH CHECK failure. */
const DENIED = "42501";
/** The parent row (artist) is not one the caller can see. */
const NO_PARENT = "23503";
const UNIQUE = "23505";
const CHECK = "23514";
const NOT_EDITABLE = "BL001";
const BAD_TRANSITION = "BL002";
const NOT_DELIVERED = "BL005";
const OAC_NOT_ELIGIBLE = "BL007";
/** An API key asked for more than its scopes (migration 0013). */
const NO_SCOPE = "BL014";
type SqlState =
  | typeof DENIED
  | typeof NO_PARENT
  | typeof UNIQUE
  | typeof CHECK
  | typeof NOT_EDITABLE
  | typeof BAD_TRANSITION
  | typeof NOT_DELIVERED
  | typeof OAC_NOT_ELIGIBLE
  | typeof NO_SCOPE;

const STATUSES = [
  "draft",
  "pending",
  "submitted",
  "in_review",
  "approved",
  "rejected",
  "delivering",
  "delivered",
  "live",
  "takedown_requested",
  "taken_down",
] as const;
type Status = (typeof STATUSES)[number];
/** A release that went to no store may still be deleted (withdrawn). */
const NEVER_DELIVERED: readonly Status[] = [
  "draft",
  "pending",
  "submitted",
  "in_review",
  "approved",
  "rejected",
];
/** Where a post-delivery metadata correction applies. */
const CORRECTABLE: readonly Status[] = ["delivered", "live"];

/** What a statement did: its value (rows, a row count) or the SQLSTATE it failed with. */
type Result<T> = { ok: T } | { error: string };

const outcome = <T>(expected: T | SqlState): Result<T> =>
  typeof expected === "string" && /^[0-9A-Z]{5}$/.test(expected)
    ? { error: expected }
    : { ok: expected as T };

const describeOutcome = (expected: unknown): string =>
  typeof expected === "string" && /^[0-9A-Z]{5}$/.test(expected)
    ? `fails ${expected}`
    : typeof expected === "number"
      ? `${expected} row${expected === 1 ? "" : "s"}`
      : Array.isArray(expected)
        ? expected.length
          ? `sees ${expected.join(", ")}`
          : "sees nothing"
        : JSON.stringify(expected);

/** Thrown at the end of a statement that must not stay, so that its transaction rolls back. */
class RollBack extends Error {
  readonly value: unknown;
  constructor(value: unknown) {
    super("rolled back on purpose");
    this.value = value;
  }
}

/** Runs `fn` as `claims` in one transaction, rolled back unless `commit`. */
async function run<T>(
  db: Db,
  claims: Claims,
  fn: (tx: Tx) => Promise<T>,
  options: { commit?: boolean } = {},
): Promise<Result<T>> {
  try {
    const value = await db.withRequestContext(claims, async (tx) => {
      const v = await fn(tx);
      if (!options.commit) throw new RollBack(v);
      return v;
    });
    return { ok: value };
  } catch (error) {
    if (error instanceof RollBack) return { ok: error.value as T };
    const sqlstate = asDbError(error)?.sqlstate;
    if (sqlstate) return { error: sqlstate };
    throw error;
  }
}

/** Rows changed by one statement (rolled back). */
const affected = (db: Db, claims: Claims, text: string, params: unknown[] = []): Promise<Result<number>> =>
  run(db, claims, async (tx) => (await tx.query(text, params)).rowCount);

/** The rows one statement returns (rolled back). */
const rows = <R = Record<string, unknown>>(
  db: Db,
  claims: Claims,
  text: string,
  params: unknown[] = [],
): Promise<Result<R[]>> => run(db, claims, async (tx) => (await tx.query<R>(text, params)).rows);

async function asService<R = Record<string, unknown>>(
  db: Db,
  text: string,
  params: unknown[] = [],
): Promise<R[]> {
  return db.asService(async (tx) => (await tx.query<R>(text, params)).rows);
}

// ---------------------------------------------------------------------------------------------
// The seeded world
// ---------------------------------------------------------------------------------------------

const PEOPLE = [
  "ownerA",
  "adminA",
  "memberA",
  "viewerA",
  "memberB",
  "ownerS",
  "ownerC",
  "memberO1",
  "memberO2",
  "viewerO",
] as const;
type Person = (typeof PEOPLE)[number];
type AccountName = "A" | "B" | "S" | "C" | "O";
type TenantName = "t1" | "t2" | "t3";

type ReleaseName =
  | "draftA"
  | "completeA"
  | "deliveredA"
  | "oacDraft"
  | "deliveredB"
  | "deliveredC"
  | "deliveredO1"
  | "deliveredO2";
type ArtistName = "A" | "oac" | "B" | "C" | "O1" | "O2";

const KEY_STATUSES = ["pending_reveal", "active", "frozen", "revoked"] as const;
const ALL_SCOPES = ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage", "keys:manage"];
type KeyStatus = (typeof KEY_STATUSES)[number];

interface World {
  tenants: Record<TenantName, Tenant>;
  accounts: Record<AccountName, Account>;
  people: Record<Person, SeedUser>;
  claims: Record<Caller, Claims>;
  artists: Record<ArtistName, string>;
  releases: Record<ReleaseName, string>;
  /** One release of A's artist, created by memberA with a track, per status. */
  byStatus: Record<Status, string>;
  /** Account A's keys by status; keys of B, S and C are active. */
  keysOfA: Record<KeyStatus, string>;
  /** Seeded row id -> label, so visible rows are compared by exact id and reported readably. */
  labels: Map<string, string>;
}

async function insertId(db: Db, claims: Claims, text: string, params: unknown[]): Promise<string> {
  const r = await db.withRequestContext(claims, (tx) => tx.query<{ id: string }>(text, params));
  const id = r.rows[0]?.id;
  if (!id) throw new Error(`no id returned by: ${text}`);
  return id;
}

const artistAs = (db: Db, user: SeedUser, account: Account, name: string) =>
  insertId(
    db,
    userClaims(user),
    "insert into public.artist_profiles (account_id, name) values ($1, $2) returning id",
    [account.id, name],
  );

const releaseAs = (db: Db, user: SeedUser, artist: string, title: string) =>
  insertId(
    db,
    userClaims(user),
    "insert into public.releases (artist_id, title) values ($1, $2) returning id",
    [artist, title],
  );

async function deliveredReleaseAs(db: Db, user: SeedUser, artist: string, title: string): Promise<string> {
  const id = await releaseAs(db, user, artist, title);
  await forceReleaseStatus(db, id, "delivered");
  return id;
}

/** A key inserted on the operator's path (which keeps the status and hash it is given). */
async function seedKey(
  db: Db,
  account: Account,
  status: KeyStatus,
  scopes: string[] = ["catalog:read"],
): Promise<string> {
  const hash = status === "pending_reveal" || status === "revoked" ? null : randomBytes(32).toString("hex");
  const [row] = await asService<{ id: string }>(
    db,
    `insert into internal.api_keys (account_id, name, scopes, key_hash, status)
     values ($1, $2, $3, $4, $5) returning id`,
    [account.id, `${status} key`, scopes, hash, status],
  );
  if (!row) throw new Error("no key");
  return row.id;
}

async function seedDelivery(db: Db, release: string, account: Account, store: string): Promise<string> {
  const [row] = await asService<{ id: string }>(
    db,
    "insert into internal.release_deliveries (release_id, account_id, store, status) values ($1, $2, $3, 'delivered') returning id",
    [release, account.id, store],
  );
  if (!row) throw new Error("no delivery");
  return row.id;
}

async function seedWorld(db: Db): Promise<World> {
  const tenants: Record<TenantName, Tenant> = {
    t1: await seedTenant(db),
    t2: await seedTenant(db),
    t3: await seedTenant(db, "owner-only"),
  };
  const accounts: Record<AccountName, Account> = {
    A: await seedAccount(db, tenants.t1, "Label A"),
    B: await seedAccount(db, tenants.t1, "Label B"),
    S: await createAccount(db, { tenantId: tenants.t1.id, name: "Label A (sandbox)", isSandbox: true }),
    C: await seedAccount(db, tenants.t2, "Label C"),
    O: await seedAccount(db, tenants.t3, "Label O"),
  };
  const membership: Record<Person, [AccountName, "owner" | "admin" | "member" | "viewer"]> = {
    ownerA: ["A", "owner"],
    adminA: ["A", "admin"],
    memberA: ["A", "member"],
    viewerA: ["A", "viewer"],
    memberB: ["B", "member"],
    ownerS: ["S", "owner"],
    ownerC: ["C", "owner"],
    memberO1: ["O", "member"],
    memberO2: ["O", "member"],
    viewerO: ["O", "viewer"],
  };
  const tenantOf = (a: AccountName): Tenant => (a === "C" ? tenants.t2 : a === "O" ? tenants.t3 : tenants.t1);
  const people = {} as Record<Person, SeedUser>;
  for (const person of PEOPLE) {
    const [account, role] = membership[person];
    people[person] = await seedUser(db, tenantOf(account), [{ account: accounts[account], role }]);
  }

  const artists: Record<ArtistName, string> = {
    A: await artistAs(db, people.memberA, accounts.A, "Artist A"),
    oac: await artistAs(db, people.memberA, accounts.A, "Channel Seeker"),
    B: await artistAs(db, people.memberB, accounts.B, "Artist B"),
    C: await artistAs(db, people.ownerC, accounts.C, "Artist C"),
    O1: await artistAs(db, people.memberO1, accounts.O, "Artist O1"),
    O2: await artistAs(db, people.memberO2, accounts.O, "Artist O2"),
  };

  // A release with nothing to fix: a date past the lead time, a known genre, the world, one track.
  const completeA = await insertId(
    db,
    userClaims(people.memberA),
    `insert into public.releases (artist_id, title, release_date, primary_genre, licensed_territories_include)
     values ($1, 'Complete', current_date + 60, 'pop', 'WW') returning id`,
    [artists.A],
  );
  await insertId(
    db,
    userClaims(people.memberA),
    "insert into public.tracks (release_id, title, isrc, track_number) values ($1, 'Song', 'USAAA2600001', 1) returning id",
    [completeA],
  );
  const releases: Record<ReleaseName, string> = {
    draftA: await releaseAs(db, people.memberA, artists.A, "Draft A"),
    completeA,
    deliveredA: await deliveredReleaseAs(db, people.memberA, artists.A, "Delivered A"),
    oacDraft: await releaseAs(db, people.memberA, artists.oac, "Not Yet Delivered"),
    deliveredB: await deliveredReleaseAs(db, people.memberB, artists.B, "Delivered B"),
    deliveredC: await deliveredReleaseAs(db, people.ownerC, artists.C, "Delivered C"),
    deliveredO1: await deliveredReleaseAs(db, people.memberO1, artists.O1, "Delivered O1"),
    deliveredO2: await deliveredReleaseAs(db, people.memberO2, artists.O2, "Delivered O2"),
  };

  const byStatus = {} as Record<Status, string>;
  for (const status of STATUSES) {
    const id = await releaseAs(db, people.memberA, artists.A, `Release ${status}`);
    await insertId(
      db,
      userClaims(people.memberA),
      "insert into public.tracks (release_id, title, track_number) values ($1, 'Track', 1) returning id",
      [id],
    );
    if (status !== "draft") await forceReleaseStatus(db, id, status);
    byStatus[status] = id;
  }

  const labels = new Map<string, string>();
  const keysOfA = {} as Record<KeyStatus, string>;
  for (const status of KEY_STATUSES) {
    // A's active key is adminKeyA's: the database reads a key's scopes from its row (migration 0013).
    keysOfA[status] = await seedKey(db, accounts.A, status, status === "active" ? ALL_SCOPES : undefined);
    labels.set(keysOfA[status], `A.${status}`);
  }
  for (const account of ["B", "S", "C"] as const) {
    labels.set(await seedKey(db, accounts[account], "active"), `${account}.active`);
  }

  const deliveries: [ReleaseName, AccountName, string, string][] = [
    ["deliveredA", "A", "spotify", "A.spotify"],
    ["deliveredA", "A", "apple_music", "A.apple_music"],
    ["deliveredB", "B", "spotify", "B.spotify"],
    ["deliveredC", "C", "spotify", "C.spotify"],
    ["deliveredO1", "O", "spotify", "O1.spotify"],
    ["deliveredO2", "O", "spotify", "O2.spotify"],
  ];
  for (const [release, account, store, label] of deliveries) {
    labels.set(await seedDelivery(db, releases[release], accounts[account], store), label);
  }

  const claims: Record<Caller, Claims> = {
    anon: anonClaims(tenants.t1),
    ownerA: userClaims(people.ownerA),
    adminA: userClaims(people.adminA),
    memberA: userClaims(people.memberA),
    viewerA: userClaims(people.viewerA),
    memberB: userClaims(people.memberB),
    ownerS: userClaims(people.ownerS),
    ownerC: userClaims(people.ownerC),
    tamperedOwnerA: { ...userClaims(people.ownerA), tenant_id: tenants.t2.id },
    adminKeyA: { ...keyClaims(accounts.A, "admin"), api_key_id: keysOfA.active },
    keyA: keyClaims(accounts.A, "member"),
    viewerKeyA: keyClaims(accounts.A, "viewer"),
    memberO1: userClaims(people.memberO1),
    memberO2: userClaims(people.memberO2),
    viewerO: userClaims(people.viewerO),
    keyO: keyClaims(accounts.O, "member"),
    tenantService1: tenantServiceClaims(tenants.t1),
    tenantService2: tenantServiceClaims(tenants.t2),
    tenantServiceO: tenantServiceClaims(tenants.t3),
    service: serviceClaims,
  };
  return { tenants, accounts, people, claims, artists, releases, byStatus, keysOfA, labels };
}

/** The labels of the seeded rows a select returned, sorted. */
async function visibleLabels(
  db: Db,
  w: World,
  caller: Caller,
  text: string,
  params: unknown[] = [],
): Promise<Result<string[]>> {
  const r = await rows<{ id: string }>(db, w.claims[caller], text, params);
  if ("error" in r) return r;
  return { ok: r.ok.map((row) => w.labels.get(row.id) ?? `unseeded row ${row.id}`).sort() };
}

// ---------------------------------------------------------------------------------------------
// The suites
// ---------------------------------------------------------------------------------------------

describeEachEngine("RLS of the public API's tables and functions (migration 0007)", (t) => {
  let seeded: World | undefined;
  before(async () => {
    seeded = await seedWorld(t().db);
  });
  const world = (): World => {
    if (!seeded) throw new Error("world not seeded");
    return seeded;
  };
  const db = (): Db => t().db;
  const as = (caller: Caller): Claims => world().claims[caller];

  // -------------------------------------------------------------------------------------------
  describe("validation catalogues: territories, genres, stores", () => {
    const CATALOGUES = [
      {
        table: "territories",
        insert: "insert into internal.territories (code, name) values ('ZZ', 'Nowhere')",
        update: "update internal.territories set name = 'Renamed' where code = 'XK'",
        delete: "delete from internal.territories where code = 'AQ'",
      },
      {
        table: "genres",
        insert: "insert into internal.genres (code, name) values ('test-genre', 'Test Genre')",
        update: "update internal.genres set name = 'Renamed' where code = 'pop'",
        delete: "delete from internal.genres where code = 'comedy'",
      },
      {
        table: "stores",
        insert:
          "insert into internal.stores (code, name, offers_oac) values ('test_store', 'Test Store', true)",
        update: "update internal.stores set offers_oac = true where code = 'spotify'",
        delete: "delete from internal.stores where code = 'beatport'",
      },
    ] as const;
    const READERS: Caller[] = [
      "anon",
      "ownerA",
      "memberA",
      "viewerA",
      "keyA",
      "viewerKeyA",
      "tenantService1",
    ];
    const WRITERS: Caller[] = [...READERS, "adminKeyA", "tenantService2"];

    for (const c of CATALOGUES) {
      for (const caller of READERS) {
        test(`${c.table}: ${caller} reads every row`, async () => {
          const [all] = await asService<{ n: number }>(
            db(),
            `select count(*)::int as n from internal.${c.table}`,
          );
          assert.ok((all?.n ?? 0) > 0);
          assert.deepEqual(
            await rows(db(), as(caller), `select count(*)::int as n from internal.${c.table}`),
            { ok: [{ n: all?.n }] },
          );
        });
      }
      for (const op of ["insert", "update", "delete"] as const) {
        for (const caller of WRITERS) {
          test(`${c.table}: ${op} as ${caller} fails ${DENIED}`, async () => {
            assert.deepEqual(await affected(db(), as(caller), c[op]), { error: DENIED });
          });
        }
        test(`${c.table}: ${op} as service: 1 row`, async () => {
          assert.deepEqual(await affected(db(), as("service"), c[op]), { ok: 1 });
        });
      }
    }
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.api_keys", () => {
    const KEYS_OF_A = ["A.active", "A.frozen", "A.pending_reveal", "A.revoked"];
    const KEY_VISIBILITY: [Caller, readonly string[] | SqlState][] = [
      ["anon", DENIED],
      ["ownerA", KEYS_OF_A],
      ["adminA", KEYS_OF_A],
      ["memberA", []],
      ["viewerA", []],
      ["memberB", []],
      ["ownerS", ["S.active"]],
      ["ownerC", ["C.active"]],
      ["tamperedOwnerA", []],
      ["adminKeyA", KEYS_OF_A],
      ["keyA", []],
      ["viewerKeyA", []],
      ["memberO1", []],
      ["keyO", []],
      ["tenantService1", DENIED],
      ["tenantService2", DENIED],
      ["service", [...KEYS_OF_A, "B.active", "C.active", "S.active"].sort()],
    ];
    for (const [caller, expected] of KEY_VISIBILITY) {
      test(`select as ${caller}: ${describeOutcome(expected)}`, async () => {
        assert.deepEqual(
          await visibleLabels(db(), world(), caller, "select id from internal.api_keys"),
          outcome(expected),
        );
      });
    }

    const SECRET_READS = [
      "select key_hash from internal.api_keys",
      "select reveal_code_hash from internal.api_keys",
      "select * from internal.api_keys",
      "select id from internal.api_keys where key_hash is not null",
      "select id from internal.api_keys order by reveal_code_hash",
    ];
    for (const caller of ["ownerA", "adminKeyA"] as const) {
      for (const text of SECRET_READS) {
        test(`${caller} cannot read the secrets: ${text} fails ${DENIED}`, async () => {
          assert.deepEqual(await rows(db(), as(caller), text), { error: DENIED });
        });
      }
    }

    /** What a client's new key of `account` looks like (created_by: the person, null for a key). */
    const created = (w: World, account: AccountName, by: Person | null, accountRole = "viewer") => ({
      account_id: w.accounts[account].id,
      tenant_id: w.accounts[account].tenant_id,
      mode: w.accounts[account].is_sandbox ? "test" : "live",
      prefix: w.accounts[account].is_sandbox ? "bk_test_" : "bk_live_",
      status: "pending_reveal",
      account_role: accountRole,
      created_by: by ? w.people[by].id : null,
    });
    const INSERT_KEY = `insert into internal.api_keys (account_id, name, scopes) values ($1, 'New key', $2)
      returning account_id, tenant_id, mode, prefix, status, account_role, created_by`;

    const KEY_INSERTS: [Caller, AccountName, Person | null | SqlState][] = [
      ["ownerA", "A", "ownerA"],
      ["adminA", "A", "adminA"],
      ["adminKeyA", "A", null],
      ["ownerS", "S", "ownerS"],
      ["memberA", "A", DENIED],
      ["viewerA", "A", DENIED],
      ["keyA", "A", DENIED],
      ["viewerKeyA", "A", DENIED],
      ["ownerA", "B", DENIED],
      ["ownerA", "S", DENIED],
      ["adminKeyA", "B", DENIED],
      ["ownerA", "C", DENIED],
      ["ownerC", "A", DENIED],
      ["tamperedOwnerA", "A", DENIED],
      ["anon", "A", DENIED],
      ["tenantService1", "A", DENIED],
    ];
    for (const [caller, account, expected] of KEY_INSERTS) {
      const what = expected === DENIED ? `fails ${DENIED}` : "pending_reveal, its account's tenant and mode";
      test(`insert a key of ${account} as ${caller}: ${what}`, async () => {
        const w = world();
        const r = await rows(db(), as(caller), INSERT_KEY, [w.accounts[account].id, ["catalog:read"]]);
        if (expected === DENIED) assert.deepEqual(r, { error: DENIED });
        else assert.deepEqual(r, { ok: [created(w, account, expected as Person | null)] });
      });
    }

    const SCOPE_ROLES: [scopes: string[], expected: string][] = [
      [[], "viewer"],
      [["catalog:read"], "viewer"],
      [["royalties:read", "webhooks:manage"], "viewer"],
      [["catalog:write"], "member"],
      [["catalog:read", "catalog:write", "royalties:read"], "member"],
      [["keys:manage"], "admin"],
      [["catalog:read", "catalog:write", "keys:manage"], "admin"],
      [["catalog:delete"], CHECK],
      [["catalog:read", "admin"], CHECK],
    ];
    for (const [scopes, expected] of SCOPE_ROLES) {
      test(`a key with scopes [${scopes.join(", ")}]: ${expected === CHECK ? `fails ${CHECK}` : `account_role ${expected}`}`, async () => {
        const r = await rows(
          db(),
          as("ownerA"),
          "insert into internal.api_keys (account_id, scopes) values ($1, $2) returning account_role",
          [world().accounts.A.id, scopes],
        );
        assert.deepEqual(r, expected === CHECK ? { error: CHECK } : { ok: [{ account_role: expected }] });
      });
    }

    // Issue 26: a key gives a new key at most its own scopes, whatever the interface (migration
    // 0013). The maker is a real key of A (the database reads its scopes from its row); an owner,
    // signed in, gives any scope.
    const SCOPE_LIMITS: [maker: string[] | "ownerA", asked: string[], expected: "ok" | typeof NO_SCOPE][] = [
      [["keys:manage"], ["keys:manage"], "ok"],
      [["keys:manage"], ["catalog:read"], NO_SCOPE],
      [["keys:manage"], ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage"], NO_SCOPE],
      [["keys:manage", "catalog:read"], ["catalog:read"], "ok"],
      [["keys:manage", "catalog:read"], ["catalog:read", "royalties:read"], NO_SCOPE],
      [["keys:manage", "catalog:read"], ["catalog:read", "keys:manage"], "ok"],
      [ALL_SCOPES, ALL_SCOPES, "ok"],
      ["ownerA", ALL_SCOPES, "ok"],
    ];
    for (const [maker, asked, expected] of SCOPE_LIMITS) {
      const who = maker === "ownerA" ? "ownerA" : `a key with [${maker.join(", ")}]`;
      test(`${who} creates a key with [${asked.join(", ")}]: ${expected === "ok" ? "ok" : `fails ${expected}`}`, async () => {
        const w = world();
        const keyId = maker === "ownerA" ? undefined : await seedKey(db(), w.accounts.A, "active", maker);
        try {
          const claims = keyId ? { ...keyClaims(w.accounts.A, "admin"), api_key_id: keyId } : as("ownerA");
          const r = await rows(
            db(),
            claims,
            "insert into internal.api_keys (account_id, scopes) values ($1, $2) returning scopes",
            [w.accounts.A.id, asked],
          );
          assert.deepEqual(r, expected === "ok" ? { ok: [{ scopes: asked }] } : { error: NO_SCOPE });
        } finally {
          if (keyId) await asService(db(), "delete from internal.api_keys where id = $1", [keyId]);
        }
      });
    }
    test("a key's claims naming a key that is not active, or another account's, give no scope", async () => {
      const w = world();
      for (const [status, account] of [
        ["frozen", "A"],
        ["revoked", "A"],
        ["active", "B"],
      ] as const) {
        const keyId = await seedKey(db(), w.accounts[account], status, ALL_SCOPES);
        try {
          const claims = { ...keyClaims(w.accounts.A, "admin"), api_key_id: keyId };
          assert.deepEqual(
            await rows(db(), claims, "insert into internal.api_keys (account_id, scopes) values ($1, $2)", [
              w.accounts.A.id,
              ["catalog:read"],
            ]),
            { error: NO_SCOPE },
            `${status} key of ${account}`,
          );
        } finally {
          await asService(db(), "delete from internal.api_keys where id = $1", [keyId]);
        }
      }
    });

    // Columns outside the insert grant: the operator's (secret, status, identity of the key).
    const INSERT_FORBIDDEN: [column: string, value: (w: World) => unknown][] = [
      ["key_hash", () => randomBytes(32).toString("hex")],
      ["reveal_code_hash", () => randomBytes(32).toString("hex")],
      ["status", () => "active"],
      ["prefix", () => "bk_live_forged"],
      ["mode", () => "test"],
      ["tenant_id", (w) => w.tenants.t2.id],
      ["account_role", () => "admin"],
      ["created_by", (w) => w.people.memberB.id],
      ["revealed_at", () => "2026-01-01T00:00:00Z"],
      ["last_used_at", () => "2026-01-01T00:00:00Z"],
      ["reveal_failures", () => 0],
      ["reveal_locked_at", () => "2026-01-01T00:00:00Z"],
    ];
    for (const [column, value] of INSERT_FORBIDDEN) {
      for (const caller of ["ownerA", "adminKeyA"] as const) {
        test(`insert naming ${column} as ${caller} fails ${DENIED}`, async () => {
          const w = world();
          assert.deepEqual(
            await affected(
              db(),
              as(caller),
              `insert into internal.api_keys (account_id, scopes, ${column}) values ($1, '{catalog:read}', $2)`,
              [w.accounts.A.id, value(w)],
            ),
            { error: DENIED },
          );
        });
      }
    }

    for (const [caller, account] of [
      ["ownerA", "A"],
      ["adminKeyA", "A"],
      ["ownerS", "S"],
    ] as const) {
      test(`a key ${caller} creates is stored pending_reveal with no secret (checked as service)`, async () => {
        const w = world();
        const r = await run(
          db(),
          as(caller),
          async (tx) =>
            (
              await tx.query<{ id: string }>(
                "insert into internal.api_keys (account_id, name, scopes) values ($1, 'Committed', $2) returning id",
                [w.accounts[account].id, ["catalog:write", "keys:manage"]],
              )
            ).rows[0]?.id,
          { commit: true },
        );
        assert.ok("ok" in r && r.ok, `insert failed: ${JSON.stringify(r)}`);
        const id = r.ok;
        try {
          const [stored] = await asService(
            db(),
            `select key_hash, reveal_code_hash, status, mode, prefix, tenant_id, account_id, account_role, created_by
             from internal.api_keys where id = $1`,
            [id],
          );
          const expected = created(w, account, caller === "adminKeyA" ? null : (caller as Person), "admin");
          assert.deepEqual(stored, { key_hash: null, reveal_code_hash: null, ...expected });
        } finally {
          await asService(db(), "delete from internal.api_keys where id = $1", [id]);
        }
      });
    }

    const MOVES: [from: KeyStatus, to: KeyStatus, expected: "ok" | typeof BAD_TRANSITION][] = [
      ["active", "frozen", "ok"],
      ["frozen", "active", "ok"],
      ["active", "revoked", "ok"],
      ["frozen", "revoked", "ok"],
      ["pending_reveal", "revoked", "ok"],
      ["revoked", "active", BAD_TRANSITION],
      ["revoked", "frozen", BAD_TRANSITION],
      ["revoked", "pending_reveal", BAD_TRANSITION],
      ["pending_reveal", "active", BAD_TRANSITION],
      ["pending_reveal", "frozen", BAD_TRANSITION],
      ["active", "pending_reveal", BAD_TRANSITION],
      ["frozen", "pending_reveal", BAD_TRANSITION],
    ];
    for (const [from, to, expected] of MOVES) {
      for (const caller of ["ownerA", "adminKeyA"] as const) {
        test(`${caller} moves a key ${from} -> ${to}: ${expected === "ok" ? "ok" : `fails ${expected}`}`, async () => {
          const r = await rows(
            db(),
            as(caller),
            `update internal.api_keys set status = $2 where id = $1
             returning status, frozen_at is not null as frozen, revoked_at is not null as revoked`,
            [world().keysOfA[from], to],
          );
          assert.deepEqual(
            r,
            expected === "ok"
              ? {
                  ok: [
                    { status: to, frozen: to === "frozen", revoked: from === "revoked" || to === "revoked" },
                  ],
                }
              : { error: expected },
          );
        });
      }
    }

    // A key seen by nobody but its managers cannot be moved by anyone else: RLS finds no row.
    for (const caller of [
      "memberA",
      "viewerA",
      "keyA",
      "viewerKeyA",
      "memberB",
      "ownerC",
      "tamperedOwnerA",
    ] as const) {
      test(`${caller} freezes A's active key: 0 rows`, async () => {
        assert.deepEqual(
          await affected(db(), as(caller), "update internal.api_keys set status = 'frozen' where id = $1", [
            world().keysOfA.active,
          ]),
          { ok: 0 },
        );
      });
    }
    for (const caller of ["anon", "tenantService1"] as const) {
      test(`${caller} freezes A's active key: fails ${DENIED}`, async () => {
        assert.deepEqual(
          await affected(db(), as(caller), "update internal.api_keys set status = 'frozen' where id = $1", [
            world().keysOfA.active,
          ]),
          { error: DENIED },
        );
      });
    }

    test("ownerA renames A's key: 1 row", async () => {
      assert.deepEqual(
        await affected(db(), as("ownerA"), "update internal.api_keys set name = 'Renamed' where id = $1", [
          world().keysOfA.active,
        ]),
        { ok: 1 },
      );
    });

    const UPDATE_FORBIDDEN: [column: string, value: (w: World) => unknown][] = [
      ["key_hash", () => randomBytes(32).toString("hex")],
      ["prefix", () => "bk_live_forged"],
      ["mode", () => "test"],
      ["account_id", (w) => w.accounts.B.id],
      ["tenant_id", (w) => w.tenants.t2.id],
      ["account_role", () => "admin"],
      ["scopes", () => ["keys:manage"]],
      ["created_by", (w) => w.people.memberB.id],
      ["revealed_at", () => "2026-01-01T00:00:00Z"],
      ["reveal_code_hash", () => randomBytes(32).toString("hex")],
      ["reveal_attempts", () => 0],
      ["reveal_failures", () => 0],
      ["reveal_locked_at", () => null],
      ["expires_at", () => "2099-01-01T00:00:00Z"],
      ["revoked_at", () => null],
    ];
    for (const [column, value] of UPDATE_FORBIDDEN) {
      for (const caller of ["ownerA", "adminKeyA"] as const) {
        test(`update of ${column} as ${caller} fails ${DENIED}`, async () => {
          const w = world();
          assert.deepEqual(
            await affected(db(), as(caller), `update internal.api_keys set ${column} = $2 where id = $1`, [
              w.keysOfA.active,
              value(w),
            ]),
            { error: DENIED },
          );
        });
      }
    }
    for (const caller of ["ownerA", "adminKeyA"] as const) {
      test(`delete of A's key as ${caller} fails ${DENIED}`, async () => {
        assert.deepEqual(
          await affected(db(), as(caller), "delete from internal.api_keys where id = $1", [
            world().keysOfA.revoked,
          ]),
          { error: DENIED },
        );
      });
    }
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.idempotency_keys: the server's own path only", () => {
    before(async () => {
      await asService(
        db(),
        `insert into internal.idempotency_keys (owner, method, path, key, request_hash, locked_until)
         values ($1, 'POST', '/api/public/v1/releases', 'seeded', 'hash', now() + interval '1 minute')`,
        [`account:${world().accounts.A.id}`],
      );
    });
    const STATEMENTS = {
      select: "select owner, response_body from internal.idempotency_keys",
      insert: `insert into internal.idempotency_keys (owner, method, path, key, request_hash, locked_until)
               values ($1, 'POST', '/api/public/v1/releases', 'another', 'hash', now())`,
      update:
        "update internal.idempotency_keys set status = 'done', response_status = 201 where key = 'seeded'",
      delete: "delete from internal.idempotency_keys where key = 'seeded'",
    } as const;
    for (const op of ["select", "insert", "update", "delete"] as const) {
      const params = (w: World) => (op === "insert" ? [`account:${w.accounts.A.id}`] : []);
      for (const caller of CLIENTS) {
        test(`${op} as ${caller} fails ${DENIED}`, async () => {
          assert.deepEqual(await affected(db(), as(caller), STATEMENTS[op], params(world())), {
            error: DENIED,
          });
        });
      }
      test(`${op} as service: 1 row`, async () => {
        assert.deepEqual(await affected(db(), as("service"), STATEMENTS[op], params(world())), { ok: 1 });
      });
    }
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.api_key_reveal_failures (migration 0013): the server's own path only", () => {
    before(async () => {
      await asService(
        db(),
        "insert into internal.api_key_reveal_failures (account_id, key_id) values ($1, $2)",
        [world().accounts.A.id, world().keysOfA.pending_reveal],
      );
    });
    const STATEMENTS = {
      select: "select account_id, failed_at from internal.api_key_reveal_failures",
      insert: "insert into internal.api_key_reveal_failures (account_id) values ($1)",
      update: "update internal.api_key_reveal_failures set failed_at = now() - interval '2 days'",
      delete: "delete from internal.api_key_reveal_failures",
    } as const;
    for (const op of ["select", "insert", "update", "delete"] as const) {
      const params = (w: World) => (op === "insert" ? [w.accounts.A.id] : []);
      for (const caller of CLIENTS) {
        test(`${op} as ${caller} fails ${DENIED}`, async () => {
          assert.deepEqual(await affected(db(), as(caller), STATEMENTS[op], params(world())), {
            error: DENIED,
          });
        });
      }
      test(`${op} as service: 1 row`, async () => {
        assert.deepEqual(await affected(db(), as("service"), STATEMENTS[op], params(world())), { ok: 1 });
      });
    }
    test("no client reads or writes the reveal counters of a key", async () => {
      for (const caller of ["ownerA", "adminKeyA"] as const) {
        for (const sql of [
          "select reveal_failures from internal.api_keys",
          "select reveal_attempts from internal.api_keys",
          "update internal.api_keys set reveal_failures = 0",
        ]) {
          assert.deepEqual(await affected(db(), as(caller), sql), { error: DENIED }, `${caller}: ${sql}`);
        }
      }
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.release_deliveries", () => {
    const OF_A = ["A.apple_music", "A.spotify"];
    const VISIBILITY: [Caller, readonly string[] | SqlState][] = [
      ["anon", DENIED],
      ["ownerA", OF_A],
      ["memberA", OF_A],
      ["viewerA", OF_A],
      ["memberB", ["B.spotify"]],
      ["ownerS", []],
      ["ownerC", ["C.spotify"]],
      ["tamperedOwnerA", []],
      ["adminKeyA", OF_A],
      ["keyA", OF_A],
      ["viewerKeyA", OF_A],
      // Owner-only: a member reads the deliveries of the releases they created; a key, its whole account.
      ["memberO1", ["O1.spotify"]],
      ["memberO2", ["O2.spotify"]],
      ["viewerO", []],
      ["keyO", ["O1.spotify", "O2.spotify"]],
      ["tenantService1", [...OF_A, "B.spotify"]],
      ["tenantService2", ["C.spotify"]],
      ["tenantServiceO", ["O1.spotify", "O2.spotify"]],
      ["service", [...OF_A, "B.spotify", "C.spotify", "O1.spotify", "O2.spotify"]],
    ];
    for (const [caller, expected] of VISIBILITY) {
      test(`select as ${caller}: ${describeOutcome(expected)}`, async () => {
        assert.deepEqual(
          await visibleLabels(db(), world(), caller, "select id from internal.release_deliveries"),
          outcome(expected),
        );
      });
    }

    const WRITES = {
      insert:
        "insert into internal.release_deliveries (release_id, account_id, store) values ($1, $2, 'deezer')",
      update:
        "update internal.release_deliveries set status = 'live', live_at = now() where release_id = $1 and $2::uuid is not null",
      delete: "delete from internal.release_deliveries where release_id = $1 and $2::uuid is not null",
    } as const;
    for (const op of ["insert", "update", "delete"] as const) {
      for (const caller of CLIENTS) {
        test(`${op} as ${caller} fails ${DENIED}`, async () => {
          const w = world();
          assert.deepEqual(
            await affected(db(), as(caller), WRITES[op], [w.releases.deliveredA, w.accounts.A.id]),
            { error: DENIED },
          );
        });
      }
      test(`${op} as service: ${op === "insert" ? 1 : 2} row(s)`, async () => {
        const w = world();
        assert.deepEqual(
          await affected(db(), as("service"), WRITES[op], [w.releases.deliveredA, w.accounts.A.id]),
          { ok: op === "insert" ? 1 : 2 },
        );
      });
    }
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.oac_requests", () => {
    const ASK = "insert into internal.oac_requests (artist_id) values ($1)";
    let requestId: string | undefined;

    test("before the artist has a delivered release: BL007 for a member, a key and the tenant's service key", async () => {
      const w = world();
      for (const caller of ["memberA", "keyA", "tenantService1"] as const) {
        assert.deepEqual(
          await affected(db(), as(caller), ASK, [w.artists.oac]),
          { error: OAC_NOT_ELIGIBLE },
          caller,
        );
      }
    });

    test("the artist's release is delivered (operator)", async () => {
      await forceReleaseStatus(db(), world().releases.oacDraft, "delivered");
    });

    const REFUSED: [name: string, Caller, text: string, params: (w: World) => unknown[], SqlState][] = [
      [
        "for a store without Official Artist Channels",
        "memberA",
        "insert into internal.oac_requests (artist_id, store) values ($1, 'spotify')",
        (w) => [w.artists.oac],
        OAC_NOT_ELIGIBLE,
      ],
      ["by a viewer", "viewerA", ASK, (w) => [w.artists.oac], DENIED],
      ["by a viewer key", "viewerKeyA", ASK, (w) => [w.artists.oac], DENIED],
      ["by the anon key", "anon", ASK, (w) => [w.artists.oac], DENIED],
      [
        "naming its status",
        "memberA",
        "insert into internal.oac_requests (artist_id, status) values ($1, 'approved')",
        (w) => [w.artists.oac],
        DENIED,
      ],
      [
        "naming its creator",
        "memberA",
        "insert into internal.oac_requests (artist_id, created_by) values ($1, $2)",
        (w) => [w.artists.oac, w.people.memberB.id],
        DENIED,
      ],
      [
        "naming completed_at",
        "memberA",
        "insert into internal.oac_requests (artist_id, completed_at) values ($1, now())",
        (w) => [w.artists.oac],
        DENIED,
      ],
      ["for another account's artist", "memberA", ASK, (w) => [w.artists.B], NO_PARENT],
      [
        "for another account's artist, naming one's own account",
        "memberA",
        "insert into internal.oac_requests (account_id, artist_id) values ($1, $2)",
        (w) => [w.accounts.A.id, w.artists.B],
        NO_PARENT,
      ],
      ["for another account's artist, as a key", "keyA", ASK, (w) => [w.artists.B], NO_PARENT],
      ["for A's artist by a member of B", "memberB", ASK, (w) => [w.artists.oac], NO_PARENT],
      ["for A's artist by another tenant's owner", "ownerC", ASK, (w) => [w.artists.oac], NO_PARENT],
      ["for A's artist by a tampered token", "tamperedOwnerA", ASK, (w) => [w.artists.oac], NO_PARENT],
      [
        "for A's artist by another tenant's service key",
        "tenantService2",
        ASK,
        (w) => [w.artists.oac],
        NO_PARENT,
      ],
      ["for a colleague's artist under owner-only", "memberO2", ASK, (w) => [w.artists.O1], NO_PARENT],
    ];
    for (const [name, caller, text, params, expected] of REFUSED) {
      test(`a request ${name} (${caller}) fails ${expected}`, async () => {
        assert.deepEqual(await affected(db(), as(caller), text, params(world())), { error: expected });
      });
    }

    for (const caller of ["keyA", "tenantService1", "memberO1"] as const) {
      test(`a request by ${caller} for its account's delivered artist is accepted (rolled back)`, async () => {
        const w = world();
        const artist = caller === "memberO1" ? w.artists.O1 : w.artists.oac;
        const r = await rows(
          db(),
          as(caller),
          "insert into internal.oac_requests (artist_id) values ($1) returning status, store, account_id",
          [artist],
        );
        const account = caller === "memberO1" ? w.accounts.O : w.accounts.A;
        assert.deepEqual(r, {
          ok: [{ status: "requested", store: "youtube_music", account_id: account.id }],
        });
      });
    }

    test("a member of A asks for A's delivered artist: accepted as 'requested', created by them", async () => {
      const w = world();
      const r = await run(
        db(),
        as("memberA"),
        async (tx) =>
          (
            await tx.query<Record<string, unknown>>(
              `insert into internal.oac_requests (artist_id, channel_url, note) values ($1, 'https://youtube.com/@seeker', 'Merge please')
               returning id, status, store, account_id, created_by, completed_at`,
              [w.artists.oac],
            )
          ).rows,
        { commit: true },
      );
      assert.ok("ok" in r, `insert failed: ${JSON.stringify(r)}`);
      const [{ id, ...row } = {}] = r.ok;
      requestId = String(id);
      w.labels.set(requestId, "A.oac");
      assert.deepEqual(row, {
        status: "requested",
        store: "youtube_music",
        account_id: w.accounts.A.id,
        created_by: w.people.memberA.id,
        completed_at: null,
      });
    });

    for (const caller of ["memberA", "keyA", "tenantService1"] as const) {
      test(`a second open request for the artist (${caller}) fails ${UNIQUE}`, async () => {
        assert.deepEqual(await affected(db(), as(caller), ASK, [world().artists.oac]), { error: UNIQUE });
      });
    }

    test("the request queued an oac.request job (checked as service); clients cannot read the queue", async () => {
      assert.ok(requestId);
      const jobs = await asService(
        db(),
        "select payload, status from internal.jobs where kind = 'oac.request' and dedupe_key = $1",
        [requestId],
      );
      assert.deepEqual(jobs, [{ payload: { oac_request_id: requestId }, status: "queued" }]);
      for (const caller of ["memberA", "keyA", "tenantService1"] as const) {
        assert.deepEqual(
          await rows(db(), as(caller), "select id from internal.jobs"),
          { error: DENIED },
          caller,
        );
      }
    });

    const OAC_VISIBILITY: [Caller, readonly string[] | SqlState][] = [
      ["anon", DENIED],
      ["memberA", ["A.oac"]],
      ["ownerA", ["A.oac"]],
      ["viewerA", ["A.oac"]],
      ["keyA", ["A.oac"]],
      ["viewerKeyA", ["A.oac"]],
      ["memberB", []],
      ["ownerC", []],
      ["tamperedOwnerA", []],
      ["memberO1", []],
      ["tenantService1", ["A.oac"]],
      ["tenantService2", []],
    ];
    for (const [caller, expected] of OAC_VISIBILITY) {
      test(`select as ${caller}: ${describeOutcome(expected)}`, async () => {
        assert.deepEqual(
          await visibleLabels(db(), world(), caller, "select id from internal.oac_requests"),
          outcome(expected),
        );
      });
    }

    const CLIENT_CHANGES: [string, string][] = [
      ["approves it", "update internal.oac_requests set status = 'approved' where id = $1"],
      ["cancels it", "update internal.oac_requests set status = 'cancelled' where id = $1"],
      ["edits its note", "update internal.oac_requests set note = 'Edited' where id = $1"],
      ["deletes it", "delete from internal.oac_requests where id = $1"],
    ];
    for (const [name, text] of CLIENT_CHANGES) {
      for (const caller of ["memberA", "ownerA", "keyA", "adminKeyA", "tenantService1", "anon"] as const) {
        test(`${caller} ${name}: fails ${DENIED}`, async () => {
          assert.deepEqual(await affected(db(), as(caller), text, [requestId]), { error: DENIED });
        });
      }
    }
    test("the operator approves it: completed_at is set", async () => {
      const r = await rows(
        db(),
        as("service"),
        "update internal.oac_requests set status = 'approved' where id = $1 returning status, completed_at is not null as completed",
        [requestId],
      );
      assert.deepEqual(r, { ok: [{ status: "approved", completed: true }] });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.release_problems(id)", () => {
    /** What a release with nothing filled in lacks. */
    const BARE = [
      "licensed_territories_include:no_territories",
      "primary_genre:required",
      "release_date:required",
      "tracks:no_tracks",
    ];
    const CASES: [Caller, release: ReleaseName | "unknown", expected: readonly string[] | null][] = [
      ["memberA", "draftA", BARE],
      ["ownerA", "draftA", BARE],
      ["viewerA", "draftA", BARE],
      ["keyA", "draftA", BARE],
      ["viewerKeyA", "draftA", BARE],
      ["memberA", "completeA", []],
      ["memberA", "unknown", null],
      ["memberB", "draftA", null],
      ["ownerS", "draftA", null],
      ["ownerC", "draftA", null],
      ["tamperedOwnerA", "draftA", null],
      ["memberA", "deliveredB", null],
      ["memberA", "deliveredC", null],
      ["keyA", "deliveredC", null],
      ["memberO1", "deliveredO1", BARE],
      ["memberO2", "deliveredO1", null],
      ["viewerO", "deliveredO1", null],
      ["keyO", "deliveredO1", BARE],
      // A tenant's service key reaches every row of its tenant (docs/database.md), and is granted the function.
      ["tenantService1", "draftA", BARE],
      ["tenantServiceO", "deliveredO1", BARE],
      ["tenantService2", "draftA", null],
      ["tenantService1", "deliveredC", null],
      ["service", "draftA", BARE],
    ];
    test("anon may not call it (42501): execute is granted to callers with an account only", async () => {
      const r = await rows(db(), as("anon"), "select internal.release_problems($1) as problems", [
        world().releases.draftA,
      ]);
      assert.deepEqual(r, { error: DENIED });
    });
    for (const [caller, release, expected] of CASES) {
      const what = expected === null ? "null" : expected.length ? expected.join(", ") : "no problems";
      test(`${caller} asks about ${release}: ${what}`, async () => {
        const id = release === "unknown" ? randomUUID() : world().releases[release];
        const r = await rows<{ problems: { param: string; code: string }[] | null }>(
          db(),
          as(caller),
          "select internal.release_problems($1) as problems",
          [id],
        );
        assert.ok("ok" in r, `failed: ${JSON.stringify(r)}`);
        const problems = r.ok[0]?.problems;
        assert.deepEqual(
          problems === null ? null : problems?.map((p) => `${p.param}:${p.code}`).sort(),
          expected,
        );
      });
    }
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.correct_release_metadata(id, changes)", () => {
    const CALL = `select (r).id as id, (r).title as title, (r).status as status
      from (select internal.correct_release_metadata($1, $2::jsonb) as r) s`;
    const CORRECTION = { title: "Corrected Title" };
    const correct = (caller: Caller, release: string, changes: unknown) =>
      rows(db(), as(caller), CALL, [release, JSON.stringify(changes)]);
    const corrected = (release: string, status: Status = "delivered") => ({
      ok: [{ id: release, title: CORRECTION.title, status }],
    });
    const REFUSED = { ok: [{ id: null, title: null, status: null }] };

    const CASES: [Caller, ReleaseName, changes: unknown, expected: "corrected" | "refused" | SqlState][] = [
      ["memberA", "deliveredA", CORRECTION, "corrected"],
      ["ownerA", "deliveredA", CORRECTION, "corrected"],
      ["adminA", "deliveredA", CORRECTION, "corrected"],
      ["keyA", "deliveredA", CORRECTION, "corrected"],
      ["adminKeyA", "deliveredA", CORRECTION, "corrected"],
      ["service", "deliveredA", CORRECTION, "corrected"],
      ["viewerA", "deliveredA", CORRECTION, "refused"],
      ["viewerKeyA", "deliveredA", CORRECTION, "refused"],
      ["memberB", "deliveredA", CORRECTION, "refused"],
      ["ownerS", "deliveredA", CORRECTION, "refused"],
      ["ownerC", "deliveredA", CORRECTION, "refused"],
      ["tamperedOwnerA", "deliveredA", CORRECTION, "refused"],
      ["anon", "deliveredA", CORRECTION, DENIED],
      ["memberA", "deliveredC", CORRECTION, "refused"],
      ["memberA", "deliveredB", CORRECTION, "refused"],
      // Refused before anything else is checked: another account learns nothing of the release.
      ["memberB", "deliveredA", { status: "draft" }, "refused"],
      ["memberB", "draftA", CORRECTION, "refused"],
      ["memberO1", "deliveredO1", CORRECTION, "corrected"],
      ["keyO", "deliveredO1", CORRECTION, "corrected"],
      ["memberO2", "deliveredO1", CORRECTION, "refused"],
      ["viewerO", "deliveredO1", CORRECTION, "refused"],
      // A tenant's service key writes every row of its tenant, and is granted the function.
      ["tenantService1", "deliveredA", CORRECTION, "corrected"],
      ["tenantServiceO", "deliveredO1", CORRECTION, "corrected"],
      ["tenantService2", "deliveredA", CORRECTION, "refused"],
      ["memberA", "draftA", CORRECTION, NOT_DELIVERED],
      ["memberA", "deliveredA", { status: "draft" }, DENIED],
      ["memberA", "deliveredA", { release_date: "2030-01-01" }, DENIED],
      ["memberA", "deliveredA", { title: "Fine", account_id: randomUUID() }, DENIED],
      ["memberA", "deliveredA", { upc: "012345678905" }, DENIED],
      ["memberA", "deliveredA", { status_reason: "Self-approved" }, DENIED],
      ["memberA", "deliveredA", { created_by: randomUUID() }, DENIED],
      ["keyA", "deliveredA", { services: ["spotify"] }, DENIED],
    ];
    for (const [caller, release, changes, expected] of CASES) {
      test(`${caller} corrects ${release} with ${JSON.stringify(changes)}: ${expected}`, async () => {
        const id = world().releases[release];
        const r = await correct(caller, id, changes);
        assert.deepEqual(
          r,
          expected === "corrected" ? corrected(id) : expected === "refused" ? REFUSED : { error: expected },
        );
      });
    }

    for (const status of STATUSES) {
      const expected = CORRECTABLE.includes(status) ? "corrected" : NOT_DELIVERED;
      test(`a member corrects a ${status} release: ${expected}`, async () => {
        const id = world().byStatus[status];
        assert.deepEqual(
          await correct("memberA", id, CORRECTION),
          expected === "corrected" ? corrected(id, status) : { error: expected },
        );
      });
    }

    test("a committed correction changes the release and queues release.update_delivery (checked as service)", async () => {
      const w = world();
      const id = w.releases.deliveredA;
      const queued = await asService(
        db(),
        "select count(*)::int as n from internal.jobs where kind = 'release.update_delivery'",
      );
      assert.deepEqual(queued, [{ n: 0 }], "rolled-back and refused corrections leave no job");
      const r = await run(
        db(),
        as("memberA"),
        async (tx) =>
          (await tx.query(CALL, [id, JSON.stringify({ title: "Corrected", explicit: true })])).rows,
        {
          commit: true,
        },
      );
      assert.deepEqual(r, { ok: [{ id, title: "Corrected", status: "delivered" }] });
      assert.deepEqual(
        await asService(db(), "select title, explicit, status from public.releases where id = $1", [id]),
        [{ title: "Corrected", explicit: true, status: "delivered" }],
      );
      assert.deepEqual(
        await asService(
          db(),
          "select payload, status from internal.jobs where kind = 'release.update_delivery' and dedupe_key = $1",
          [id],
        ),
        [{ payload: { release_id: id }, status: "queued" }],
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("release deletion (release_rules as replaced by 0007)", () => {
    for (const status of STATUSES) {
      const expected = NEVER_DELIVERED.includes(status) ? 1 : NOT_EDITABLE;
      for (const caller of ["memberA", "keyA", "tenantService1"] as const) {
        test(`${caller} deletes A's ${status} release (with its track): ${describeOutcome(expected)}`, async () => {
          assert.deepEqual(
            await affected(db(), as(caller), "delete from public.releases where id = $1", [
              world().byStatus[status],
            ]),
            outcome(expected),
          );
        });
      }
    }
    for (const caller of ["viewerA", "viewerKeyA", "memberB", "ownerC", "tenantService2"] as const) {
      test(`${caller} deletes A's submitted release: 0 rows`, async () => {
        assert.deepEqual(
          await affected(db(), as(caller), "delete from public.releases where id = $1", [
            world().byStatus.submitted,
          ]),
          { ok: 0 },
        );
      });
    }
    test("memberO2 deletes memberO1's release under owner-only: 0 rows", async () => {
      assert.deepEqual(
        await affected(db(), as("memberO2"), "delete from public.releases where id = $1", [
          world().releases.deliveredO1,
        ]),
        { ok: 0 },
      );
    });
    test("the operator deletes a live release: 1 row", async () => {
      assert.deepEqual(
        await affected(db(), as("service"), "delete from public.releases where id = $1", [
          world().byStatus.live,
        ]),
        { ok: 1 },
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  describe("internal.release_lead_days()", () => {
    const leadDays = async (caller: Caller) =>
      rows<{ days: number }>(db(), as(caller), "select internal.release_lead_days() as days");
    const CALLERS_BY_TENANT: [Caller, TenantName][] = [
      ["ownerA", "t1"],
      ["memberB", "t1"],
      ["keyA", "t1"],
      ["adminKeyA", "t1"],
      ["tenantService1", "t1"],
      ["ownerC", "t2"],
      ["tenantService2", "t2"],
      ["memberO1", "t3"],
      ["keyO", "t3"],
      ["tenantServiceO", "t3"],
    ];

    for (const [caller] of CALLERS_BY_TENANT) {
      test(`by default, ${caller}: 7`, async () => {
        assert.deepEqual(await leadDays(caller), { ok: [{ days: 7 }] });
      });
    }

    test("a tenant without an organization_settings row: 7", async () => {
      await asService(db(), "delete from internal.organization_settings where tenant_id = $1", [
        world().tenants.t2.id,
      ]);
      assert.deepEqual(await leadDays("ownerC"), { ok: [{ days: 7 }] });
    });

    for (const caller of ["ownerA", "adminKeyA", "tenantService1"] as const) {
      test(`${caller} cannot set its tenant's lead time: fails ${DENIED}`, async () => {
        assert.deepEqual(
          await affected(
            db(),
            as(caller),
            "update internal.organization_settings set release_lead_days = 0 where tenant_id = $1",
            [world().tenants.t1.id],
          ),
          { error: DENIED },
        );
      });
    }

    test("the operator sets tenant 1's lead time to 14", async () => {
      // Every tenant gets an organization_settings row when it is created: insert, or update that row.
      await asService(
        db(),
        `insert into internal.organization_settings (tenant_id, release_lead_days) values ($1, 14)
         on conflict (tenant_id) do update set release_lead_days = excluded.release_lead_days`,
        [world().tenants.t1.id],
      );
    });

    for (const [caller, tenant] of CALLERS_BY_TENANT) {
      const expected = tenant === "t1" ? 14 : 7;
      test(`then ${caller} (${tenant}): ${expected}`, async () => {
        assert.deepEqual(await leadDays(caller), { ok: [{ days: expected }] });
      });
    }
  });
});
