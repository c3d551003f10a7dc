import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { before, describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import type { Claims } from "../src/db/types.ts";
import { addRecoupable, setExchangeRate, setFee, updateMoneySettings } from "../src/money/operator.ts";
import { fileTaxForm, reviewTaxForm, setPayoutMethod } from "../src/money/payees.ts";
import { approveBatch, requestPayout } from "../src/money/payouts.ts";
import { approvePeriod } from "../src/money/statements.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { type Account, POLICY_PRESETS, type PolicyPreset, type Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey } from "./support/public-api.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import {
  anonClaims,
  EXPOSED_TABLES,
  forceReleaseStatus,
  keyClaims,
  type SeedUser,
  seedAccount,
  seedStaffUser,
  seedTenant,
  seedUser,
  serviceClaims,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The RLS matrix: every caller against every exposed table, for select, count(*), insert, update
 * and delete, under both tenant policy presets, on every engine. Each suite seeds one world:
 *
 *   tenant 1  account A  rows "A"  created by memberA, rows "A2" created by memberA2; viewerA reads
 *             account B  rows "B"  created by memberB
 *   tenant 2  account C  rows "C"  created by memberC (the "tenant2User" caller)
 *
 * Every group holds an artist, a spare artist (no releases), a draft release with a track,
 * analytics and an upload of its cover artwork (media_assets, 'pending' as a new upload URL leaves
 * it), a delivered release with a takedown request (so now takedown_requested) and a live release;
 * every person has one notification. Writes always aim at account A's rows created by memberA (or
 * at account A itself for inserts), so each column of the matrix reads as "who may do this to
 * memberA's data". Every write runs in its own transaction, which is rolled back.
 *
 * A tenant's own service-role key runs as tenant_service: every row of its tenant, whatever the
 * preset and whoever created it, and nothing of the other tenant. It writes the columns a client
 * writes (besides analytics and notifications, which only it and service_role write; an upload,
 * once asked for, is service_role's alone). Past the matrix, the same writes aimed at tenant 2's
 * account C show tenant 1's key stopped at its tenant's edge.
 */

const TABLES = EXPOSED_TABLES;
type Table = (typeof TABLES)[number];

const CALLERS = [
  "anon", // the anon key of tenant 1
  "memberA", // member of account A
  "memberA2", // another member of account A
  "memberB", // member of account B, same tenant
  "viewerA", // viewer of account A
  "tenant2User", // member of account C in tenant 2
  "keyA", // public-API key of account A
  "viewerKeyA", // public-API key of account A with the viewer role
  "service", // service_role
  "tenantService1", // tenant 1's service-role key (tenant_service)
  "tenantService2", // tenant 2's service-role key
  "tamperedUser", // memberA's token with tenant_id naming tenant 2
  "tamperedKey", // keyA's claims with tenant_id naming tenant 2
  "tamperedService", // tenant 1's service-role key with tenant_id naming a tenant that does not exist
  // Staff (migration 0019), users of no account:
  "reviewer1", // staff reviewer of tenant 1 (a user of tenant 1)
  "operator1", // staff operator of tenant 1 (a user of tenant 1)
  "platformOperator", // platform staff, operator on every tenant (a user of tenant 2)
  "unprovenReviewer1", // a staff reviewer row of tenant 1 for a user whose address is not proven yet
] as const;
type Caller = (typeof CALLERS)[number];

type Group = "A" | "A2" | "B" | "C";
const PEOPLE = ["memberA", "memberA2", "memberB", "viewerA", "memberC"] as const;
const STAFF = ["reviewer1", "operator1", "platformOperator", "unprovenReviewer1"] as const;
type StaffCaller = (typeof STAFF)[number];
type Person = (typeof PEOPLE)[number];
/** Who a seeded row belongs to: a catalog group, or for notifications the person it is addressed to. */
type Tag = Group | Person;

type Op = "select" | "count" | Mutation;
type Mutation = "insert" | "update" | "delete";
const MUTATIONS: readonly Mutation[] = ["insert", "update", "delete"];
const OPS: readonly Op[] = ["select", "count", ...MUTATIONS];

// ---------------------------------------------------------------------------------------------
// Expected outcomes
// ---------------------------------------------------------------------------------------------

/** Missing privilege, or an RLS WITH CHECK failure. */
const DENIED = "42501";
/** The parent row (artist, release) is not visible to the caller. */
const NO_PARENT = "23503";
/** A Backline rule: the release is past the statuses its account may still change. */
const RELEASE_LOCKED = "BL001";
type SqlState = typeof DENIED | typeof NO_PARENT | typeof RELEASE_LOCKED;

/** select: the tags whose rows are visible; insert/update/delete: rows affected; or the SQLSTATE. */
type Outcome = readonly Tag[] | number | SqlState;
interface ByPreset {
  byPreset: Record<PolicyPreset, Outcome>;
}
type Expected = Outcome | ByPreset;
type Column = Record<Caller, Expected>;

/** An outcome that depends on the tenant's policy preset. */
const byPreset = (accountMembers: Outcome, ownerOnly: Outcome): ByPreset => ({
  byPreset: { "account-members": accountMembers, "owner-only": ownerOnly },
});

/**
 * What staff read (migration 0019): every row their role covers in the tenant of their token,
 * whatever the preset and whoever created it. A reviewer reads the catalog and media; an operator
 * also takedown requests and analytics. Platform staff hold their role on every tenant, and
 * through /rest/v1 read the tenant their token is of (tenant 2 here). A staff row counts only
 * once the user's address is proven.
 */
const REVIEWER_READS = {
  reviewer1: ["A", "A2", "B"],
  operator1: ["A", "A2", "B"],
  platformOperator: ["C"],
  unprovenReviewer1: [],
} as const satisfies Record<StaffCaller, Outcome>;
const OPERATOR_READS = { ...REVIEWER_READS, reviewer1: [] } as const satisfies Record<StaffCaller, Outcome>;
/** Staff write nothing through the table interface: as a caller of no account. */
const staffWrites = (sees: Outcome, blind: Outcome): Record<StaffCaller, Outcome> => ({
  reviewer1: sees,
  operator1: sees,
  platformOperator: blind,
  unprovenReviewer1: blind,
});
const STAFF_DENIED = staffWrites(DENIED, DENIED);

/** select on the catalog, analytics and media tables: whose rows each caller sees. */
const CATALOG_ROWS: Column = {
  ...REVIEWER_READS,
  anon: DENIED,
  memberA: byPreset(["A", "A2"], ["A"]),
  memberA2: byPreset(["A", "A2"], ["A2"]),
  memberB: ["B"],
  viewerA: byPreset(["A", "A2"], []),
  tenant2User: ["C"],
  keyA: ["A", "A2"],
  viewerKeyA: ["A", "A2"],
  service: ["A", "A2", "B", "C"],
  tenantService1: ["A", "A2", "B"],
  tenantService2: ["C"],
  tamperedUser: [],
  tamperedKey: [],
  tamperedService: [],
};

/**
 * select on the analytics tables: as the catalog, except that a key needs the royalties:read scope
 * (migration 0011: analytics carry revenue). The matrix's keys are claims of no stored key, so
 * they hold no scope and see no analytics; test/rls-royalties.test.ts checks stored keys with and
 * without the scope.
 */
const ANALYTICS_ROWS: Column = { ...CATALOG_ROWS, keyA: [], viewerKeyA: [], ...OPERATOR_READS };

/** select on takedown requests: as the catalog, but among staff only operators and above. */
const TAKEDOWN_ROWS: Column = { ...CATALOG_ROWS, ...OPERATOR_READS };

/** select on notifications: a user sees only their own; a tenant's service key every one of its tenant. */
const OWN_NOTIFICATIONS: Column = {
  ...staffWrites([], []),
  anon: DENIED,
  memberA: ["memberA"],
  memberA2: ["memberA2"],
  memberB: ["memberB"],
  viewerA: ["viewerA"],
  tenant2User: ["memberC"],
  keyA: [],
  viewerKeyA: [],
  service: ["memberA", "memberA2", "memberB", "viewerA", "memberC"],
  tenantService1: ["memberA", "memberA2", "memberB", "viewerA"],
  tenantService2: ["memberC"],
  tamperedUser: [],
  tamperedKey: [],
  tamperedService: [],
};

/** Insert naming account A directly (artist_profiles). */
const WRITERS_OF_ACCOUNT_A: Column = {
  ...STAFF_DENIED,
  anon: DENIED,
  memberA: 1,
  memberA2: 1,
  memberB: DENIED,
  viewerA: DENIED,
  tenant2User: DENIED,
  keyA: 1,
  viewerKeyA: DENIED,
  service: 1,
  tenantService1: 1,
  tenantService2: DENIED,
  tamperedUser: DENIED,
  tamperedKey: DENIED,
  tamperedService: DENIED,
};

/**
 * Insert under a parent row memberA created in account A (a release of A's artist, a track, a
 * takedown, an upload to A's draft release).
 */
const WRITERS_UNDER_PARENT_OF_A: Column = {
  // A reviewer sees the parent but may not write under it; others of no account do not see it.
  ...staffWrites(DENIED, NO_PARENT),
  anon: DENIED,
  memberA: 1,
  memberA2: byPreset(1, NO_PARENT),
  memberB: NO_PARENT,
  viewerA: byPreset(DENIED, NO_PARENT),
  tenant2User: NO_PARENT,
  keyA: 1,
  viewerKeyA: DENIED,
  service: 1,
  tenantService1: 1,
  tenantService2: NO_PARENT,
  tamperedUser: NO_PARENT,
  tamperedKey: NO_PARENT,
  tamperedService: NO_PARENT,
};

/** Update or delete of a row memberA created in account A. */
const WRITERS_OF_ROW_OF_A: Column = {
  ...staffWrites(0, 0),
  anon: DENIED,
  memberA: 1,
  memberA2: byPreset(1, 0),
  memberB: 0,
  viewerA: 0,
  tenant2User: 0,
  keyA: 1,
  viewerKeyA: 0,
  service: 1,
  tenantService1: 1,
  tenantService2: 0,
  tamperedUser: 0,
  tamperedKey: 0,
  tamperedService: 0,
};

/** Marking memberA's notification read. */
const RECIPIENT_OF_NOTIFICATION: Column = {
  ...staffWrites(0, 0),
  anon: DENIED,
  memberA: 1,
  memberA2: 0,
  memberB: 0,
  viewerA: 0,
  tenant2User: 0,
  keyA: 0,
  viewerKeyA: 0,
  service: 1,
  tenantService1: 1,
  tenantService2: 0,
  tamperedUser: 0,
  tamperedKey: 0,
  tamperedService: 0,
};

/**
 * No privilege for anon and authenticated; service_role and tenant 1's service key may. Another
 * tenant's key has the privilege but not the row: its insert fails the policy's WITH CHECK, and
 * its update or delete finds nothing.
 */
const serviceOnly = (otherTenant: 0 | typeof DENIED): Column => ({
  ...STAFF_DENIED,
  anon: DENIED,
  memberA: DENIED,
  memberA2: DENIED,
  memberB: DENIED,
  viewerA: DENIED,
  tenant2User: DENIED,
  keyA: DENIED,
  viewerKeyA: DENIED,
  service: 1,
  tenantService1: 1,
  tenantService2: otherTenant,
  tamperedUser: DENIED,
  tamperedKey: DENIED,
  tamperedService: otherTenant,
});
const SERVICE_INSERTS = serviceOnly(DENIED);
const SERVICE_CHANGES = serviceOnly(0);

/**
 * Only service_role may: no client, a tenant's own service key included, has the privilege (moving
 * a takedown request on; an upload's status, checks and deletion).
 */
const OPERATOR_ONLY: Column = {
  ...STAFF_DENIED,
  anon: DENIED,
  memberA: DENIED,
  memberA2: DENIED,
  memberB: DENIED,
  viewerA: DENIED,
  tenant2User: DENIED,
  keyA: DENIED,
  viewerKeyA: DENIED,
  service: 1,
  tenantService1: DENIED,
  tenantService2: DENIED,
  tamperedUser: DENIED,
  tamperedKey: DENIED,
  tamperedService: DENIED,
};

const MATRIX: Record<Table, Record<Exclude<Op, "count">, Column>> = {
  artist_profiles: {
    select: CATALOG_ROWS,
    insert: WRITERS_OF_ACCOUNT_A,
    update: WRITERS_OF_ROW_OF_A,
    delete: WRITERS_OF_ROW_OF_A,
  },
  releases: {
    select: CATALOG_ROWS,
    insert: WRITERS_UNDER_PARENT_OF_A,
    update: WRITERS_OF_ROW_OF_A,
    delete: WRITERS_OF_ROW_OF_A,
  },
  tracks: {
    select: CATALOG_ROWS,
    insert: WRITERS_UNDER_PARENT_OF_A,
    update: WRITERS_OF_ROW_OF_A,
    delete: WRITERS_OF_ROW_OF_A,
  },
  release_analytics: {
    select: ANALYTICS_ROWS,
    insert: SERVICE_INSERTS,
    update: SERVICE_CHANGES,
    delete: SERVICE_CHANGES,
  },
  track_analytics: {
    select: ANALYTICS_ROWS,
    insert: SERVICE_INSERTS,
    update: SERVICE_CHANGES,
    delete: SERVICE_CHANGES,
  },
  takedown_requests: {
    select: TAKEDOWN_ROWS,
    insert: WRITERS_UNDER_PARENT_OF_A,
    update: OPERATOR_ONLY,
    delete: OPERATOR_ONLY,
  },
  notifications: {
    select: OWN_NOTIFICATIONS,
    insert: SERVICE_INSERTS,
    update: RECIPIENT_OF_NOTIFICATION,
    delete: SERVICE_CHANGES,
  },
  // An upload follows its release: seen by whoever sees the release, asked for by whoever may
  // change it; what happens to it afterwards is the server's.
  media_assets: {
    select: CATALOG_ROWS,
    insert: WRITERS_UNDER_PARENT_OF_A,
    update: OPERATOR_ONLY,
    delete: OPERATOR_ONLY,
  },
};

// ---------------------------------------------------------------------------------------------
// The seeded world
// ---------------------------------------------------------------------------------------------

interface CatalogRows {
  artist: string;
  spareArtist: string;
  draft: string;
  delivered: string;
  live: string;
  track: string;
  takedown: string;
  releaseAnalytics: string;
  trackAnalytics: string;
  artwork: string;
}

/** Which seeded rows live in each table (labels are `${tag}.${name}`, e.g. "A2.draft"). */
const SEEDED_ROWS: Record<Table, readonly (keyof CatalogRows | "notification")[]> = {
  artist_profiles: ["artist", "spareArtist"],
  releases: ["draft", "delivered", "live"],
  tracks: ["track"],
  release_analytics: ["releaseAnalytics"],
  track_analytics: ["trackAnalytics"],
  takedown_requests: ["takedown"],
  notifications: ["notification"],
  media_assets: ["artwork"],
};

interface World {
  tenants: { 1: Tenant; 2: Tenant };
  accounts: Record<"A" | "B" | "C", Account>;
  people: Record<Person, SeedUser>;
  catalog: Record<Group, CatalogRows>;
  notifications: Record<Person, string>;
  claims: Record<Caller, Claims>;
  /** Each staff caller's row of internal.staff. */
  staffRows: Record<StaffCaller, string>;
  /** Row id -> label, so that visible rows are compared by exact id and reported readably. */
  labels: Map<string, string>;
}

async function insertId(db: Db, claims: Claims, sql: string, params: unknown[]): Promise<string> {
  const r = await db.withRequestContext(claims, (tx) => tx.query<{ id: string }>(sql, params));
  const id = r.rows[0]?.id;
  if (!id) throw new Error(`no id returned by: ${sql}`);
  return id;
}

/**
 * One group's catalog rows, created as `creator` (so created_by is theirs); analytics and the
 * upload on the service path (the upload with created_by the creator's, as if they had asked).
 */
async function seedCatalog(db: Db, account: Account, creator: SeedUser): Promise<CatalogRows> {
  const asCreator = (sql: string, params: unknown[]) => insertId(db, userClaims(creator), sql, params);
  const asService = (sql: string, params: unknown[]) => insertId(db, serviceClaims, sql, params);
  const artistNamed = (name: string) =>
    asCreator("insert into public.artist_profiles (account_id, name) values ($1, $2) returning id", [
      account.id,
      name,
    ]);
  const artist = await artistNamed("Artist");
  const spareArtist = await artistNamed("Spare Artist");
  const releaseTitled = (title: string) =>
    asCreator("insert into public.releases (artist_id, title) values ($1, $2) returning id", [artist, title]);
  const draft = await releaseTitled("Draft");
  const delivered = await releaseTitled("Delivered");
  const live = await releaseTitled("Live");
  const track = await asCreator(
    "insert into public.tracks (release_id, title, track_number) values ($1, 'Track', 1) returning id",
    [draft],
  );
  await forceReleaseStatus(db, delivered, "delivered");
  await forceReleaseStatus(db, live, "live");
  const takedown = await asCreator(
    "insert into public.takedown_requests (release_id, reason) values ($1, 'Rights dispute') returning id",
    [delivered],
  );
  const releaseAnalytics = await asService(
    `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, streams, currency)
     values ($1, $2, '2026-01-01', '2026-01-31', 'spotify', 1000, 'USD') returning id`,
    [draft, account.id],
  );
  const trackAnalytics = await asService(
    `insert into public.track_analytics (track_id, release_id, account_id, period_start, period_end, store, streams, currency)
     values ($1, $2, $3, '2026-01-01', '2026-01-31', 'spotify', 1000, 'USD') returning id`,
    [track, draft, account.id],
  );
  const artwork = await asService(
    `insert into public.media_assets (release_id, kind, content_type, max_bytes, upload_expires_at, created_by)
     values ($1, 'artwork', 'image/jpeg', 52428800, now() + interval '1 hour', $2) returning id`,
    [draft, creator.id],
  );
  return {
    artist,
    spareArtist,
    draft,
    delivered,
    live,
    track,
    takedown,
    releaseAnalytics,
    trackAnalytics,
    artwork,
  };
}

async function seedWorld(db: Db, preset: PolicyPreset): Promise<World> {
  const tenant1 = await seedTenant(db, preset);
  const tenant2 = await seedTenant(db, preset);
  const accounts = {
    A: await seedAccount(db, tenant1, "Label A"),
    B: await seedAccount(db, tenant1, "Label B"),
    C: await seedAccount(db, tenant2, "Label C"),
  };
  const accountOf: Record<Person, Account> = {
    memberA: accounts.A,
    memberA2: accounts.A,
    memberB: accounts.B,
    viewerA: accounts.A,
    memberC: accounts.C,
  };
  const people = {} as Record<Person, SeedUser>;
  for (const person of PEOPLE) {
    const account = accountOf[person];
    const tenant = account === accounts.C ? tenant2 : tenant1;
    people[person] = await seedUser(db, tenant, [
      { account, role: person === "viewerA" ? "viewer" : "member" },
    ]);
  }
  const catalog: Record<Group, CatalogRows> = {
    A: await seedCatalog(db, accounts.A, people.memberA),
    A2: await seedCatalog(db, accounts.A, people.memberA2),
    B: await seedCatalog(db, accounts.B, people.memberB),
    C: await seedCatalog(db, accounts.C, people.memberC),
  };
  // Moving the seeded releases to live notified their accounts' members (migration 0008); the
  // matrix wants exactly one notification per person, its own.
  await db.asService((tx) =>
    tx.query("delete from public.notifications where user_id = any ($1::uuid[])", [
      PEOPLE.map((p) => people[p].id),
    ]),
  );
  const notifications = {} as Record<Person, string>;
  for (const person of PEOPLE) {
    notifications[person] = await insertId(
      db,
      serviceClaims,
      `insert into public.notifications (user_id, account_id, kind, title)
       values ($1, $2, 'release.approved', 'Your release was approved') returning id`,
      [people[person].id, accountOf[person].id],
    );
  }
  // Staff: users of no account, with a row of internal.staff each.
  const staffOf: Record<
    StaffCaller,
    { tenant: Tenant; staffOf: Tenant | null; role: string; proven: boolean }
  > = {
    reviewer1: { tenant: tenant1, staffOf: tenant1, role: "reviewer", proven: true },
    operator1: { tenant: tenant1, staffOf: tenant1, role: "operator", proven: true },
    platformOperator: { tenant: tenant2, staffOf: null, role: "operator", proven: true },
    unprovenReviewer1: { tenant: tenant1, staffOf: tenant1, role: "reviewer", proven: false },
  };
  const staffUsers = {} as Record<StaffCaller, SeedUser>;
  const staffRows = {} as Record<StaffCaller, string>;
  for (const who of STAFF) {
    const spec = staffOf[who];
    const user = await seedUser(db, spec.tenant);
    staffUsers[who] = user;
    staffRows[who] = await db.asService(async (tx) => {
      // seedUser's users have proven addresses; this one has not proven it yet.
      if (!spec.proven)
        await tx.query("update internal.users set email_proven_at = null where id = $1", [user.id]);
      const r = await tx.query<{ id: string }>(
        "insert into internal.staff (user_id, tenant_id, role) values ($1, $2, $3) returning id",
        [user.id, spec.staffOf?.id ?? null, spec.role],
      );
      return r.rows[0]?.id as string;
    });
  }

  const labels = new Map<string, string>();
  for (const [who, id] of Object.entries(staffRows)) labels.set(id, `${who}.staff`);
  for (const [group, rows] of Object.entries(catalog)) {
    for (const [name, id] of Object.entries(rows)) labels.set(id, `${group}.${name}`);
  }
  for (const [person, id] of Object.entries(notifications)) labels.set(id, `${person}.notification`);

  const claims: Record<Caller, Claims> = {
    anon: anonClaims(tenant1),
    memberA: userClaims(people.memberA),
    memberA2: userClaims(people.memberA2),
    memberB: userClaims(people.memberB),
    viewerA: userClaims(people.viewerA),
    tenant2User: userClaims(people.memberC),
    keyA: keyClaims(accounts.A),
    viewerKeyA: keyClaims(accounts.A, "viewer"),
    service: serviceClaims,
    tenantService1: tenantServiceClaims(tenant1),
    tenantService2: tenantServiceClaims(tenant2),
    tamperedUser: { ...userClaims(people.memberA), tenant_id: tenant2.id },
    tamperedKey: { ...keyClaims(accounts.A), tenant_id: tenant2.id },
    tamperedService: { ...tenantServiceClaims(tenant1), tenant_id: randomUUID() },
    reviewer1: userClaims(staffUsers.reviewer1),
    operator1: userClaims(staffUsers.operator1),
    platformOperator: userClaims(staffUsers.platformOperator),
    unprovenReviewer1: userClaims(staffUsers.unprovenReviewer1),
  };
  return {
    tenants: { 1: tenant1, 2: tenant2 },
    accounts,
    people,
    catalog,
    notifications,
    claims,
    staffRows,
    labels,
  };
}

// ---------------------------------------------------------------------------------------------
// The statements each mutation runs, aimed at account A / memberA's rows (in the matrix) or at
// account C / memberC's (tenant 1's service key against tenant 2, past the matrix)
// ---------------------------------------------------------------------------------------------

interface Statement {
  sql: string;
  params: unknown[];
}
const sql = (text: string, ...params: unknown[]): Statement => ({ sql: text, params });

/** The rows a write aims at: one group's catalog rows in its account, and its creator's notification. */
interface Target {
  account: Account;
  rows: CatalogRows;
  recipient: SeedUser;
  notification: string;
}
const targetOf = (w: World, group: "A" | "C"): Target => {
  const creator = group === "A" ? "memberA" : "memberC";
  return {
    account: w.accounts[group],
    rows: w.catalog[group],
    recipient: w.people[creator],
    notification: w.notifications[creator],
  };
};

const PERIOD = "'2026-02-01', '2026-02-28', 'matrix', 'USD'";

const STATEMENTS: Record<Table, Record<Mutation, (to: Target) => Statement>> = {
  artist_profiles: {
    insert: (to) =>
      sql("insert into public.artist_profiles (account_id, name) values ($1, 'New Artist')", to.account.id),
    update: (to) => sql("update public.artist_profiles set bio = 'Edited' where id = $1", to.rows.artist),
    delete: (to) => sql("delete from public.artist_profiles where id = $1", to.rows.spareArtist),
  },
  releases: {
    insert: (to) =>
      sql("insert into public.releases (artist_id, title) values ($1, 'New Release')", to.rows.artist),
    update: (to) => sql("update public.releases set title = 'Edited' where id = $1", to.rows.draft),
    delete: (to) => sql("delete from public.releases where id = $1", to.rows.draft),
  },
  tracks: {
    insert: (to) =>
      sql("insert into public.tracks (release_id, title) values ($1, 'New Track')", to.rows.draft),
    update: (to) => sql("update public.tracks set title = 'Edited' where id = $1", to.rows.track),
    delete: (to) => sql("delete from public.tracks where id = $1", to.rows.track),
  },
  release_analytics: {
    insert: (to) =>
      sql(
        `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, currency)
         values ($1, $2, ${PERIOD})`,
        to.rows.draft,
        to.account.id,
      ),
    update: (to) =>
      sql(
        "update public.release_analytics set streams = streams + 1 where id = $1",
        to.rows.releaseAnalytics,
      ),
    delete: (to) => sql("delete from public.release_analytics where id = $1", to.rows.releaseAnalytics),
  },
  track_analytics: {
    insert: (to) =>
      sql(
        `insert into public.track_analytics (track_id, release_id, account_id, period_start, period_end, store, currency)
         values ($1, $2, $3, ${PERIOD})`,
        to.rows.track,
        to.rows.draft,
        to.account.id,
      ),
    update: (to) =>
      sql("update public.track_analytics set streams = streams + 1 where id = $1", to.rows.trackAnalytics),
    delete: (to) => sql("delete from public.track_analytics where id = $1", to.rows.trackAnalytics),
  },
  takedown_requests: {
    insert: (to) =>
      sql(
        "insert into public.takedown_requests (release_id, reason) values ($1, 'New takedown')",
        to.rows.live,
      ),
    update: (to) =>
      sql("update public.takedown_requests set reason = 'Edited' where id = $1", to.rows.takedown),
    delete: (to) => sql("delete from public.takedown_requests where id = $1", to.rows.takedown),
  },
  notifications: {
    insert: (to) =>
      sql(
        "insert into public.notifications (user_id, account_id, kind, title) values ($1, $2, 'matrix.test', 'Hello')",
        to.recipient.id,
        to.account.id,
      ),
    update: (to) => sql("update public.notifications set read = true where id = $1", to.notification),
    delete: (to) => sql("delete from public.notifications where id = $1", to.notification),
  },
  media_assets: {
    // The audio of the draft's track, with exactly what a client may name.
    insert: (to) =>
      sql(
        `insert into public.media_assets (release_id, track_id, kind, content_type, max_bytes, upload_expires_at)
         values ($1, $2, 'audio', 'audio/wav', 1073741824, now() + interval '1 hour')`,
        to.rows.draft,
        to.rows.track,
      ),
    update: (to) => sql("update public.media_assets set status = 'valid' where id = $1", to.rows.artwork),
    delete: (to) => sql("delete from public.media_assets where id = $1", to.rows.artwork),
  },
};

// ---------------------------------------------------------------------------------------------
// Observations and the runner
// ---------------------------------------------------------------------------------------------

/** What a case observed, in a form assert.deepEqual compares and prints well. */
type Observation = { visible: string[] } | { count: number } | { affected: number } | { error: string };

/** Thrown at the end of a mutation so that its transaction rolls back and cases stay independent. */
class RollBack extends Error {
  readonly affected: number;
  constructor(affected: number) {
    super("rolled back on purpose");
    this.affected = affected;
  }
}

async function observing(fn: () => Promise<Observation>): Promise<Observation> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof RollBack) return { affected: error.affected };
    const sqlstate = asDbError(error)?.sqlstate;
    if (sqlstate) return { error: sqlstate };
    throw error;
  }
}

function selectVisible(db: Db, w: World, caller: Caller, table: Table): Promise<Observation> {
  return observing(async () => {
    const r = await db.withRequestContext(
      w.claims[caller],
      (tx) => tx.query<{ id: string }>(`select id from public.${table}`),
      { readOnly: true },
    );
    return { visible: r.rows.map((row) => w.labels.get(row.id) ?? `unseeded row ${row.id}`).sort() };
  });
}

function countVisible(db: Db, w: World, caller: Caller, table: Table): Promise<Observation> {
  return observing(async () => {
    const r = await db.withRequestContext(
      w.claims[caller],
      (tx) => tx.query<{ n: number }>(`select count(*)::int as n from public.${table}`),
      { readOnly: true },
    );
    return { count: r.rows[0]?.n ?? -1 };
  });
}

function mutate(db: Db, claims: Claims, statement: Statement): Promise<Observation> {
  return observing(() =>
    db.withRequestContext(claims, async (tx) => {
      const r = await tx.query(statement.sql, statement.params);
      throw new RollBack(r.rowCount);
    }),
  );
}

function observe(db: Db, w: World, table: Table, op: Op, caller: Caller): Promise<Observation> {
  switch (op) {
    case "select":
      return selectVisible(db, w, caller, table);
    case "count":
      return countVisible(db, w, caller, table);
    default:
      return mutate(db, w.claims[caller], STATEMENTS[table][op](targetOf(w, "A")));
  }
}

function resolve(expected: Expected, preset: PolicyPreset): Outcome {
  return typeof expected === "object" && "byPreset" in expected ? expected.byPreset[preset] : expected;
}

function labelsOf(table: Table, tags: readonly Tag[]): string[] {
  return tags.flatMap((tag) => SEEDED_ROWS[table].map((name) => `${tag}.${name}`)).sort();
}

function writeObservation(outcome: number | SqlState): Observation {
  return typeof outcome === "string" ? { error: outcome } : { affected: outcome };
}

function expectedObservation(table: Table, op: Op, outcome: Outcome): Observation {
  if (typeof outcome === "string" || typeof outcome === "number") return writeObservation(outcome);
  const visible = labelsOf(table, outcome);
  return op === "count" ? { count: visible.length } : { visible };
}

function describeObservation(o: Observation): string {
  if ("error" in o) return `fails ${o.error}`;
  if ("affected" in o) return `${o.affected} row${o.affected === 1 ? "" : "s"}`;
  if ("count" in o) return `counts ${o.count}`;
  return o.visible.length ? `sees ${o.visible.join(", ")}` : "sees nothing";
}

// ---------------------------------------------------------------------------------------------
// Cases beyond the matrix: writes that name another account, columns a caller may not update, and
// a tenant's service key at its tenant's edge
// ---------------------------------------------------------------------------------------------

interface WriteCase {
  name: string;
  caller: Caller;
  statement: (w: World) => Statement;
  expected: number | SqlState;
}

const CROSS_ACCOUNT_WRITES: WriteCase[] = [
  {
    name: "a member files a release of their own artist under another account",
    caller: "memberB",
    statement: (w) =>
      sql(
        "insert into public.releases (artist_id, account_id, title) values ($1, $2, 'Smuggled')",
        w.catalog.B.artist,
        w.accounts.A.id,
      ),
    expected: DENIED,
  },
  {
    name: "a member adds a track of their own release under another account",
    caller: "memberB",
    statement: (w) =>
      sql(
        "insert into public.tracks (release_id, account_id, title) values ($1, $2, 'Smuggled')",
        w.catalog.B.draft,
        w.accounts.A.id,
      ),
    expected: DENIED,
  },
  {
    name: "a member files a takedown of their own release under another account",
    caller: "memberB",
    statement: (w) =>
      sql(
        "insert into public.takedown_requests (release_id, account_id) values ($1, $2)",
        w.catalog.B.live,
        w.accounts.A.id,
      ),
    expected: DENIED,
  },
  {
    name: "a member asks to upload to their own release under another account",
    caller: "memberB",
    statement: (w) =>
      sql(
        `insert into public.media_assets (release_id, account_id, kind, content_type, max_bytes, upload_expires_at)
         values ($1, $2, 'artwork', 'image/jpeg', 1000, now() + interval '1 hour')`,
        w.catalog.B.draft,
        w.accounts.A.id,
      ),
    expected: DENIED,
  },
  {
    name: "a member asks to upload another account's track's audio to their own release",
    caller: "memberB",
    statement: (w) =>
      sql(
        `insert into public.media_assets (release_id, track_id, kind, content_type, max_bytes, upload_expires_at)
         values ($1, $2, 'audio', 'audio/wav', 1000, now() + interval '1 hour')`,
        w.catalog.B.draft,
        w.catalog.A.track,
      ),
    expected: NO_PARENT,
  },
  {
    name: "a member moves their release onto another account's artist",
    caller: "memberA",
    statement: (w) =>
      sql("update public.releases set artist_id = $2 where id = $1", w.catalog.A.draft, w.catalog.B.artist),
    expected: NO_PARENT,
  },
];

/**
 * Columns outside the client roles' column grants (authenticated and tenant_service alike): an
 * update naming them fails whatever the row. What the operator sets, who created a row, which
 * account a row is in and which release a track is on; of a notification, everything but `read`.
 */
type FromWorld = (w: World) => unknown;
const draftOfA: FromWorld = (w) => w.catalog.A.draft;
const artistOfA: FromWorld = (w) => w.catalog.A.artist;
const trackOfA: FromWorld = (w) => w.catalog.A.track;
const notificationOfMemberA: FromWorld = (w) => w.notifications.memberA;
const accountB: FromWorld = (w) => w.accounts.B.id;
const memberB: FromWorld = (w) => w.people.memberB.id;
const aMoment: FromWorld = () => "2026-01-01T00:00:00Z";

const NOTIFICATION_COLUMNS_BUT_READ: [column: string, newValue: FromWorld][] = [
  ["id", () => randomUUID()],
  ["tenant_id", (w) => w.tenants[1].id],
  ["user_id", memberB],
  ["account_id", accountB],
  ["kind", () => "forged.kind"],
  ["title", () => "Forged"],
  ["body", () => "Forged"],
  ["data", () => '{"forged": true}'],
  ["read_at", aMoment],
  ["created_at", aMoment],
];

type ProtectedColumn = [table: Table, column: string, row: FromWorld, newValue: FromWorld];
const PROTECTED_COLUMNS: ProtectedColumn[] = [
  ["releases", "account_id", draftOfA, accountB],
  ["releases", "status_reason", draftOfA, () => "Approved by me"],
  ["releases", "submitted_at", draftOfA, aMoment],
  ["releases", "created_by", draftOfA, memberB],
  ["artist_profiles", "account_id", artistOfA, accountB],
  ["artist_profiles", "created_by", artistOfA, memberB],
  ["tracks", "account_id", trackOfA, accountB],
  ["tracks", "release_id", trackOfA, (w) => w.catalog.A.live],
  ["tracks", "audio_metadata", trackOfA, () => '{"codec": "flac"}'],
  ["tracks", "created_by", trackOfA, memberB],
  ...NOTIFICATION_COLUMNS_BUT_READ.map(
    ([column, newValue]): ProtectedColumn => ["notifications", column, notificationOfMemberA, newValue],
  ),
];

const PROTECTED_COLUMN_WRITES: WriteCase[] = PROTECTED_COLUMNS.flatMap(([table, column, row, newValue]) =>
  (["memberA", "keyA", "tenantService1"] as const).map((caller) => ({
    name: `${table}.${column} cannot be updated`,
    caller,
    statement: (w: World) =>
      sql(`update public.${table} set ${column} = $2 where id = $1`, row(w), newValue(w)),
    expected: DENIED,
  })),
);

/**
 * Uploads past the matrix: a client asks for one with the columns of the request only (what the
 * server finds is not the client's to say), and only while the release may still change; the
 * operator may add one to any release.
 */
const uploadTo =
  (release: FromWorld, extra = "", value: FromWorld = () => null) =>
  (w: World) =>
    sql(
      `insert into public.media_assets (release_id, kind, content_type, max_bytes, upload_expires_at${extra ? `, ${extra}` : ""})
     values ($1, 'artwork', 'image/jpeg', 1000, now() + interval '1 hour'${extra ? ", $2" : ""})`,
      release(w),
      ...(extra ? [value(w)] : []),
    );
const MEDIA_COLUMNS_OF_THE_SERVER: [column: string, value: FromWorld][] = [
  ["status", () => "valid"],
  ["object_key", () => "artwork/forged/cover.jpg"],
  ["bytes", () => 1000],
  ["sha256", () => "0".repeat(64)],
  ["metadata", () => '{"width": 3000}'],
  ["uploaded_at", aMoment],
  ["validated_at", aMoment],
];
const MEDIA_WRITES: WriteCase[] = [
  ...MEDIA_COLUMNS_OF_THE_SERVER.flatMap(([column, value]) =>
    (["memberA", "keyA", "tenantService1"] as const).map(
      (caller): WriteCase => ({
        name: `media_assets.${column} cannot be named in a new upload`,
        caller,
        statement: uploadTo(draftOfA, column, value),
        expected: DENIED,
      }),
    ),
  ),
  ...(["memberA", "keyA", "tenantService1"] as const).flatMap((caller) =>
    (["delivered", "live"] as const).map(
      (status): WriteCase => ({
        name: `no upload to A's ${status} release`,
        caller,
        statement: uploadTo((w) => w.catalog.A[status]),
        expected: RELEASE_LOCKED,
      }),
    ),
  ),
  {
    name: "service_role adds an upload to a delivered release",
    caller: "service",
    statement: uploadTo((w) => w.catalog.A.delivered),
    expected: 1,
  },
  {
    name: "a member names who asked for an upload",
    caller: "memberA",
    statement: uploadTo(draftOfA, "created_by", memberB),
    expected: DENIED,
  },
];

const SERVICE_WRITES: WriteCase[] = [
  {
    name: "service_role sets a release's status_reason",
    caller: "service",
    statement: (w) =>
      sql("update public.releases set status_reason = 'Checked' where id = $1", w.catalog.A.draft),
    expected: 1,
  },
  {
    name: "service_role readdresses a notification",
    caller: "service",
    statement: (w) =>
      sql(
        "update public.notifications set user_id = $2 where id = $1",
        w.notifications.memberA,
        w.people.memberA2.id,
      ),
    expected: 1,
  },
  {
    name: "service_role notifies a user about another tenant's account (the (tenant_id, account_id) key)",
    caller: "service",
    statement: (w) =>
      sql(
        "insert into public.notifications (user_id, account_id, kind, title) values ($1, $2, 'matrix.test', 'Hello')",
        w.people.memberA.id,
        w.accounts.C.id,
      ),
    expected: NO_PARENT,
  },
];

/**
 * The matrix's writes aimed at tenant 2's account C and memberC instead of A: tenant 2's own
 * service key may make each of them that a tenant's key may make at all, tenant 1's is stopped.
 * An insert naming account C fails the policy's WITH CHECK; one naming C's parent row finds no
 * such parent; an update or delete finds no row. A write only the operator may make (moving a
 * takedown request on, deleting one; changing or deleting an upload) is denied to both keys,
 * whatever the row.
 */
const INSERT_INTO_TENANT_2: Record<Table, SqlState> = {
  artist_profiles: DENIED,
  releases: NO_PARENT,
  tracks: NO_PARENT,
  release_analytics: DENIED,
  track_analytics: DENIED,
  takedown_requests: NO_PARENT,
  notifications: DENIED,
  media_assets: NO_PARENT,
};

function writeIntoTenant2(
  table: Table,
  op: Mutation,
  caller: "tenantService1" | "tenantService2",
): number | SqlState {
  if (MATRIX[table][op] === OPERATOR_ONLY) return DENIED;
  if (caller === "tenantService2") return 1;
  return op === "insert" ? INSERT_INTO_TENANT_2[table] : 0;
}

const WRITES_INTO_TENANT_2: WriteCase[] = TABLES.flatMap((table) =>
  MUTATIONS.flatMap((op) =>
    (["tenantService2", "tenantService1"] as const).map((caller) => ({
      name: `${table} ${op} aimed at tenant 2's account C`,
      caller,
      statement: (w: World) => STATEMENTS[table][op](targetOf(w, "C")),
      expected: writeIntoTenant2(table, op, caller),
    })),
  ),
);

/**
 * Tenant 1's service key at its tenant's edge. What it may write (a new row's account and parent,
 * a release's artist, a new notification's recipient and account) must stay inside tenant 1; what
 * it may not write (a row's account, a notification's tenant, recipient or account) fails
 * whatever the value.
 */
const TENANT_SERVICE_WRITES: WriteCase[] = [
  {
    name: "a tenant's service key files a release of its artist under another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "insert into public.releases (artist_id, account_id, title) values ($1, $2, 'Smuggled')",
        w.catalog.A.artist,
        w.accounts.C.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key adds a track of its release under another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "insert into public.tracks (release_id, account_id, title) values ($1, $2, 'Smuggled')",
        w.catalog.A.draft,
        w.accounts.C.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key files a takedown of its release under another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "insert into public.takedown_requests (release_id, account_id) values ($1, $2)",
        w.catalog.A.live,
        w.accounts.C.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key asks for an upload in the name of another tenant's user",
    caller: "tenantService1",
    statement: uploadTo(draftOfA, "created_by", (w) => w.people.memberC.id),
    expected: NO_PARENT,
  },
  {
    name: "a tenant's service key moves an artist to another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "update public.artist_profiles set account_id = $2 where id = $1",
        w.catalog.A.spareArtist,
        w.accounts.C.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key moves a release onto another tenant's artist",
    caller: "tenantService1",
    statement: (w) =>
      sql("update public.releases set artist_id = $2 where id = $1", w.catalog.A.draft, w.catalog.C.artist),
    expected: NO_PARENT,
  },
  {
    name: "a tenant's service key names its own tenant_id on a notification to another tenant's user",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "insert into public.notifications (tenant_id, user_id, kind, title) values ($1, $2, 'matrix.test', 'Hello')",
        w.tenants[1].id,
        w.people.memberC.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key notifies its user about another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "insert into public.notifications (user_id, account_id, kind, title) values ($1, $2, 'matrix.test', 'Hello')",
        w.people.memberA.id,
        w.accounts.C.id,
      ),
    expected: NO_PARENT,
  },
  {
    name: "a tenant's service key readdresses a notification to another tenant's user",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "update public.notifications set user_id = $2 where id = $1",
        w.notifications.memberA,
        w.people.memberC.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key moves a notification into another tenant",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "update public.notifications set tenant_id = $2, user_id = $3 where id = $1",
        w.notifications.memberA,
        w.tenants[2].id,
        w.people.memberC.id,
      ),
    expected: DENIED,
  },
  {
    name: "a tenant's service key points its user's notification at another tenant's account",
    caller: "tenantService1",
    statement: (w) =>
      sql(
        "update public.notifications set account_id = $2 where id = $1",
        w.notifications.memberA,
        w.accounts.C.id,
      ),
    expected: DENIED,
  },
];

// ---------------------------------------------------------------------------------------------
// The suites
// ---------------------------------------------------------------------------------------------

for (const preset of POLICY_PRESETS) {
  describeEachEngine(`RLS matrix, ${preset} preset`, (t) => {
    let seeded: World | undefined;
    before(async () => {
      seeded = await seedWorld(t().db, preset);
    });
    const world = (): World => {
      if (!seeded) throw new Error("world not seeded");
      return seeded;
    };

    for (const table of TABLES) {
      describe(table, () => {
        for (const op of OPS) {
          for (const caller of CALLERS) {
            const column = MATRIX[table][op === "count" ? "select" : op];
            const expected = expectedObservation(table, op, resolve(column[caller], preset));
            test(`${op} as ${caller}: ${describeObservation(expected)}`, async () => {
              assert.deepEqual(await observe(t().db, world(), table, op, caller), expected);
            });
          }
        }
      });
    }

    // internal.staff (migration 0019): not in the table interface, but granted to authenticated
    // and tenant_service for reading. A user reads their own rows, a tenant's key its tenant's
    // (not platform staff); nobody but the operator writes.
    describe("internal.staff", () => {
      const OWN = (who: StaffCaller) => [`${who}.staff`];
      const TENANT1 = ["operator1.staff", "reviewer1.staff", "unprovenReviewer1.staff"];
      const visible: Record<Caller, string[] | typeof DENIED> = {
        anon: DENIED,
        memberA: [],
        memberA2: [],
        memberB: [],
        viewerA: [],
        tenant2User: [],
        keyA: [],
        viewerKeyA: [],
        service: [...TENANT1, "platformOperator.staff"].sort(),
        tenantService1: TENANT1,
        tenantService2: [],
        tamperedUser: [],
        tamperedKey: [],
        tamperedService: [],
        reviewer1: OWN("reviewer1"),
        operator1: OWN("operator1"),
        platformOperator: OWN("platformOperator"),
        unprovenReviewer1: OWN("unprovenReviewer1"),
      };
      for (const caller of CALLERS) {
        const expected = visible[caller];
        test(`select as ${caller}: ${expected === DENIED ? `fails ${DENIED}` : expected.join(", ") || "sees nothing"}`, async () => {
          const w = world();
          const seen = await observing(async () => {
            const r = await t().db.withRequestContext(
              w.claims[caller],
              (tx) => tx.query<{ id: string }>("select id from internal.staff"),
              { readOnly: true },
            );
            return {
              visible: r.rows
                .map((row) => w.labels.get(row.id))
                .filter((l) => l !== undefined)
                .sort(),
            };
          });
          assert.deepEqual(seen, expected === DENIED ? { error: DENIED } : { visible: expected });
        });
        const writes: [string, (w: World) => Statement][] = [
          [
            "makes itself platform admin",
            (w) =>
              sql(
                "insert into internal.staff (user_id, tenant_id, role) values ($1, null, 'admin')",
                w.people.memberA.id,
              ),
          ],
          [
            "raises a role",
            (w) => sql("update internal.staff set role = 'admin' where id = $1", w.staffRows.reviewer1),
          ],
          ["removes a row", (w) => sql("delete from internal.staff where id = $1", w.staffRows.operator1)],
        ];
        for (const [what, statement] of writes) {
          const expectedWrite = writeObservation(caller === "service" ? 1 : DENIED);
          test(`${caller} ${what}: ${describeObservation(expectedWrite)}`, async () => {
            assert.deepEqual(await mutate(t().db, world().claims[caller], statement(world())), expectedWrite);
          });
        }
      }
    });

    // internal.royalty_import_runs (migration 0022): a royalty import's progress while it runs,
    // read and written by the admin API's server code only (the service role): no caller's role
    // is granted anything on it, whatever the preset.
    describe("internal.royalty_import_runs", () => {
      for (const caller of CALLERS) {
        const expected = caller === "service" ? { visible: [] } : { error: DENIED };
        test(`select as ${caller}: ${caller === "service" ? "reads it" : `fails ${DENIED}`}`, async () => {
          const seen = await observing(async () => {
            await t().db.withRequestContext(
              world().claims[caller],
              (tx) => tx.query("select id from internal.royalty_import_runs where false"),
              { readOnly: true },
            );
            return { visible: [] };
          });
          assert.deepEqual(seen, expected);
        });
        const expectedWrite = writeObservation(caller === "service" ? 1 : DENIED);
        test(`${caller} records a run: ${describeObservation(expectedWrite)}`, async () => {
          const w = world();
          const statement = sql(
            "insert into internal.royalty_import_runs (id, tenant_id, format) select gen_random_uuid(), tenant_id, 'backline' from internal.accounts where id = $1",
            w.accounts.A.id,
          );
          assert.deepEqual(await mutate(t().db, w.claims[caller], statement), expectedWrite);
        });
      }
    });

    describe("writes beyond the matrix", () => {
      for (const c of [
        ...CROSS_ACCOUNT_WRITES,
        ...PROTECTED_COLUMN_WRITES,
        ...MEDIA_WRITES,
        ...SERVICE_WRITES,
        ...WRITES_INTO_TENANT_2,
        ...TENANT_SERVICE_WRITES,
      ]) {
        const expected = writeObservation(c.expected);
        test(`${c.name}, as ${c.caller}: ${describeObservation(expected)}`, async () => {
          assert.deepEqual(await mutate(t().db, world().claims[c.caller], c.statement(world())), expected);
        });
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Migration 0020: the audit log and the MFA tables, against every caller
// ---------------------------------------------------------------------------------------------

/**
 * The audit log is read by a tenant's service-role key (its tenant's rows), by staff admins of the
 * tenant (none of this world's callers) and by the operator; nobody else reads a row, and nobody
 * at all changes one (docs/operator.md, "The audit log"). The MFA tables (factors and their
 * secrets, challenges) and the platform settings are the operator's path only.
 */
describeEachEngine("RLS matrix: the audit log and the MFA tables (migration 0020)", (t) => {
  let seeded: World | undefined;
  let factorId = "";
  before(async () => {
    seeded = await seedWorld(t().db, "account-members");
    const w = seeded;
    factorId = (
      await t().db.asService((tx) =>
        tx.query<{ id: string }>(
          "insert into internal.mfa_factors (tenant_id, user_id, secret_sealed) values ($1, $2, $3) returning id",
          [w.tenants[1].id, w.people.memberA.id, t().db.secrets.encrypt("JBSWY3DPEHPK3PXP")],
        ),
      )
    ).rows[0]?.id as string;
    await t().db.asService((tx) =>
      tx.query("insert into internal.mfa_challenges (factor_id) values ($1)", [factorId]),
    );
    // A passkey of memberA (tenant 1) and of memberC (tenant 2), and a challenge (migration 0054).
    await t().db.asService(async (tx) => {
      for (const [tenant, user, id] of [
        [w.tenants[1].id, w.people.memberA.id, "credential-of-member-a"],
        [w.tenants[2].id, w.people.memberC.id, "credential-of-member-c"],
      ] as const) {
        await tx.query(
          `insert into internal.passkeys (tenant_id, user_id, credential_id, public_key, rp_id)
           values ($1, $2, $3, '\\x00112233445566778899aabbccddeeff', 'app.example.com')`,
          [tenant, user, id],
        );
      }
      await tx.query(
        `insert into internal.passkey_challenges (tenant_id, kind, challenge, rp_id, expires_at)
         values ($1, 'authentication', 'challenge-0123456789', 'app.example.com', now() + interval '5 minutes')`,
        [w.tenants[1].id],
      );
    });
  });
  const world = (): World => {
    if (!seeded) throw new Error("world not seeded");
    return seeded;
  };

  /** What a caller reads: the tenants of the rows it sees, or the refusal's SQLSTATE. */
  async function read(caller: Caller, sql: string): Promise<string[] | string> {
    try {
      const rows = await t().db.withRequestContext(
        world().claims[caller],
        async (tx) => (await tx.query<{ t: string | null }>(sql)).rows,
      );
      const w = world();
      const name = (id: string | null) =>
        id === w.tenants[1].id ? "tenant1" : id === w.tenants[2].id ? "tenant2" : String(id);
      return [...new Set(rows.map((r) => name(r.t)))].sort();
    } catch (error) {
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  async function write(caller: Caller, sql: string, params: unknown[] = []): Promise<string> {
    try {
      const r = await t().db.withRequestContext(world().claims[caller], async (tx) => {
        const result = await tx.query(sql, params);
        throw Object.assign(new Error("rollback"), { rows: result.rowCount });
      });
      return `ok ${String(r)}`;
    } catch (error) {
      const rows = (error as { rows?: number }).rows;
      if (rows !== undefined) return rows === 0 ? "no rows" : `changed ${rows}`;
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  const AUDIT_READS: Record<Caller, string[] | string> = {
    anon: "42501",
    memberA: [],
    memberA2: [],
    memberB: [],
    viewerA: [],
    tenant2User: [],
    keyA: [],
    viewerKeyA: [],
    service: ["tenant1", "tenant2"],
    tenantService1: ["tenant1"],
    tenantService2: ["tenant2"],
    tamperedUser: [],
    tamperedKey: [],
    // Its tenant_id names no tenant: none of the log's rows.
    tamperedService: [],
    // Staff below admin read none of it (a tenant's admins do: test/staff-mfa-audit.test.ts).
    reviewer1: [],
    operator1: [],
    platformOperator: [],
    unprovenReviewer1: [],
  };

  describe("internal.audit_log", () => {
    for (const caller of CALLERS) {
      test(`select as ${caller}: ${JSON.stringify(AUDIT_READS[caller])}`, async () => {
        const seen = await read(
          caller,
          `select tenant_id::text as t from internal.audit_log where tenant_id in ('${world().tenants[1].id}', '${world().tenants[2].id}')`,
        );
        assert.deepEqual(seen, AUDIT_READS[caller]);
      });
      for (const op of ["update", "delete", "insert"] as const) {
        test(`${op} as ${caller}: refused (42501)`, async () => {
          const sql = {
            update: "update internal.audit_log set actor = 'forged'",
            delete: "delete from internal.audit_log",
            insert:
              "insert into internal.audit_log (actor_type, actor, action, object_table) values ('system', 'forged', 'insert', 'x')",
          }[op];
          assert.equal(await write(caller, sql), "42501");
        });
      }
    }
  });

  // The server's own tables: code-guess counts per address and the event outbox (migration 0030),
  // a tenant's uploaded logo (served publicly by the server, written by the admin API), tenants'
  // session signing keys (migration 0048), tenants' OpenID Connect providers and sign-ins in
  // progress with them (migration 0052), are read and written on the service path only, so no
  // request role, the tenant's service key included, may read or change them.
  for (const table of [
    "internal.email_code_failures",
    "internal.events",
    "internal.brand_assets",
    "internal.signing_keys",
    "internal.oidc_providers",
    "internal.oauth_flow_states",
    // White-label plans and invoices (migration 0050): platform-level data about tenants.
    "internal.billing_issuer",
    "internal.billing_plans",
    "internal.tenant_billing",
    "internal.tenant_api_calls",
    "internal.invoice_counters",
    "internal.invoices",
    "internal.credit_notes",
  ]) {
    describe(table, () => {
      for (const caller of CALLERS) {
        if (caller === "service") {
          test("select as service: reads it", async () => {
            assert.ok(Array.isArray(await read(caller, `select null::text as t from ${table}`)));
          });
          continue;
        }
        test(`select as ${caller}: refused (42501)`, async () => {
          assert.equal(await read(caller, `select null::text as t from ${table}`), "42501");
        });
        test(`delete as ${caller}: refused (42501)`, async () => {
          assert.equal(await write(caller, `delete from ${table}`), "42501");
        });
      }
    });
  }

  // Passkeys (migration 0054): a person reads their own passkeys, in their own tenant (not through
  // a token naming another tenant, not through an API key), and only the names and dates; nobody
  // but the service path writes one.
  const PASSKEY_READS: Record<Caller, string[] | string> = {
    anon: "42501",
    memberA: ["tenant1"],
    memberA2: [],
    memberB: [],
    viewerA: [],
    tenant2User: ["tenant2"],
    keyA: [],
    viewerKeyA: [],
    service: ["tenant1", "tenant2"],
    tenantService1: "42501",
    tenantService2: "42501",
    tamperedUser: [],
    tamperedKey: [],
    tamperedService: "42501",
    reviewer1: [],
    operator1: [],
    platformOperator: [],
    unprovenReviewer1: [],
  };
  describe("internal.passkeys", () => {
    for (const caller of CALLERS) {
      test(`select as ${caller}: ${JSON.stringify(PASSKEY_READS[caller])}`, async () => {
        const seen = await read(caller, "select tenant_id::text as t from internal.passkeys");
        assert.deepEqual(seen, PASSKEY_READS[caller]);
      });
      if (caller === "service") continue;
      test(`public key, update, delete, insert as ${caller}: refused (42501)`, async () => {
        assert.equal(await read(caller, "select public_key::text as t from internal.passkeys"), "42501");
        assert.equal(await write(caller, "update internal.passkeys set friendly_name = 'x'"), "42501");
        assert.equal(await write(caller, "delete from internal.passkeys"), "42501");
        assert.equal(
          await write(
            caller,
            "insert into internal.passkeys (tenant_id, user_id, credential_id, public_key, rp_id) select tenant_id, user_id, 'forged-credential-id', public_key, rp_id from internal.passkeys",
          ),
          "42501",
        );
      });
    }
  });

  for (const table of [
    "internal.mfa_factors",
    "internal.mfa_challenges",
    "internal.platform_settings",
    "internal.passkey_challenges",
  ]) {
    describe(table, () => {
      for (const caller of CALLERS) {
        const expected = caller === "service" ? "readable" : "42501";
        test(`select as ${caller}: ${expected}`, async () => {
          const seen = await read(caller, `select null::text as t from ${table}`);
          assert.deepEqual(seen, expected === "readable" ? ["null"] : expected);
        });
        if (caller !== "service") {
          test(`delete as ${caller}: refused (42501)`, async () => {
            assert.equal(await write(caller, `delete from ${table}`), "42501");
          });
        }
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Migration 0036: the money tables and the /rest/v1 money views, against every caller
// ---------------------------------------------------------------------------------------------

/**
 * The money tables (docs/payouts.md, "Who sees what") over the matrix's world, with money in it:
 * account A delivered a track split between memberA2 (a member who is also a payee) and an outsider
 * by address, and one without splits (A's own payee); account C (tenant 2) a track split to memberC.
 * Both tenants imported a report and approved the month; memberA2 asked for a payout, which the
 * operator put in a batch; A has an expense and tenant 1 a fee. Two callers join the matrix's:
 * ownerA (an owner of A) and payoutsKeyA (a stored key of A with payouts:read) — the matrix's own
 * keys are claims of no stored key, so they hold no scope. test/rls-money.test.ts goes further
 * (a payee paid by two accounts, keys with and without the scope, the functions).
 *
 * A payee reads their own rows, an account's owner and payouts:read key the account's; a member,
 * a viewer, a key without the scope, staff, another tenant and a tampered token read nothing;
 * the operator tables are no client's. No client role writes any of it; the operator's own
 * changes to the ledger and to an approved statement are refused by the database.
 */
const MONEY_CALLERS = [...CALLERS, "ownerA", "payoutsKeyA"] as const;
type MoneyCaller = (typeof MONEY_CALLERS)[number];
type MoneyOutcome = readonly string[] | SqlState | "55000";

/** Who reads which labels: the payees' ("A:memberA2"), the accounts' ("A") or the tenants' ("tenant1"). */
const moneyReads = (
  labels: { A: readonly string[]; C: readonly string[] },
  who: { payeeA?: readonly string[]; payeeC?: readonly string[]; readersOfA?: "managers" | "members" },
): Record<MoneyCaller, MoneyOutcome> => {
  const managers = labels.A;
  const members = who.readersOfA === "members" ? labels.A : [];
  return {
    anon: DENIED,
    memberA: members,
    memberA2:
      who.readersOfA === "members" ? labels.A : (who.payeeA ?? []).filter((l) => labels.A.includes(l)),
    memberB: [],
    viewerA: members,
    tenant2User:
      who.readersOfA === "members" ? labels.C : (who.payeeC ?? []).filter((l) => labels.C.includes(l)),
    keyA: members,
    viewerKeyA: members,
    service: [...labels.A, ...labels.C].sort(),
    tenantService1: labels.A,
    tenantService2: labels.C,
    tamperedUser: [],
    tamperedKey: [],
    tamperedService: [],
    reviewer1: [],
    operator1: [],
    platformOperator: [],
    unprovenReviewer1: [],
    ownerA: managers,
    payoutsKeyA: managers,
  };
};

const PAYEES_A = ["A:memberA2", "A:outsider", "A:self"];
const PAYEES_C = ["C:memberC", "C:self"];
/** Payees with ledger entries and statements (C's own payee was never paid anything). */
const PAID_C = ["C:memberC"];
const ownPayee = { payeeA: ["A:memberA2"], payeeC: ["C:memberC"] };

/** select: what each caller sees, by the label of the payee, account or tenant each row is about. */
const MONEY_READS: Record<string, { sql: string; key: string; reads: Record<MoneyCaller, MoneyOutcome> }> = {
  "internal.payees": {
    sql: "internal.payees",
    key: "id",
    reads: moneyReads({ A: PAYEES_A, C: PAYEES_C }, ownPayee),
  },
  "public.payees": {
    sql: "public.payees",
    key: "id",
    reads: moneyReads({ A: PAYEES_A, C: PAYEES_C }, ownPayee),
  },
  "internal.ledger_entries": {
    sql: "internal.ledger_entries",
    key: "coalesce(payee_id::text, tenant_id::text || ':books')",
    reads: {
      ...moneyReads({ A: PAYEES_A, C: PAID_C }, ownPayee),
      // The books (store, fees, recoupable, cash, payouts pending) only to the tenant's service key.
      service: [...PAYEES_A, ...PAID_C, "tenant1:books", "tenant2:books"].sort(),
      tenantService1: [...PAYEES_A, "tenant1:books"],
      tenantService2: [...PAID_C, "tenant2:books"],
    },
  },
  "public.payee_balances": {
    sql: "public.payee_balances",
    key: "payee_id",
    reads: moneyReads({ A: PAYEES_A, C: PAID_C }, ownPayee),
  },
  "internal.statements": {
    sql: "internal.statements",
    key: "payee_id",
    reads: moneyReads({ A: PAYEES_A, C: PAID_C }, ownPayee),
  },
  "public.statements": {
    sql: "public.statements",
    key: "payee_id",
    reads: moneyReads({ A: PAYEES_A, C: PAID_C }, ownPayee),
  },
  "internal.payouts": {
    sql: "internal.payouts",
    key: "payee_id",
    reads: moneyReads({ A: ["A:memberA2"], C: [] }, ownPayee),
  },
  "public.payouts": {
    sql: "public.payouts",
    key: "payee_id",
    reads: moneyReads({ A: ["A:memberA2"], C: [] }, ownPayee),
  },
  "internal.recoupables": {
    sql: "internal.recoupables",
    key: "account_id",
    reads: moneyReads({ A: ["A"], C: [] }, {}),
  },
  // Split versions and shares are the catalog's (as tracks.splits): whoever reads the account's tracks.
  "internal.split_versions": {
    sql: "internal.split_versions",
    key: "account_id",
    reads: moneyReads({ A: ["A"], C: ["C"] }, { readersOfA: "members" }),
  },
  "internal.split_shares": {
    sql: "internal.split_shares s join internal.split_versions v on v.id = s.version_id",
    key: "v.account_id",
    reads: moneyReads({ A: ["A"], C: ["C"] }, { readersOfA: "members" }),
  },
};
/** The operator's records: no client reads them; a tenant's service key its tenant's rows. */
for (const [table, tenants] of [
  ["money_settings", ["tenant1"]],
  ["distribution_fees", ["tenant1"]],
  ["money_periods", ["tenant1", "tenant2"]],
  ["exchange_rates", ["tenant1"]],
  ["payout_batches", ["tenant1"]],
] as const) {
  const reads = Object.fromEntries(MONEY_CALLERS.map((c) => [c, DENIED])) as Record<
    MoneyCaller,
    MoneyOutcome
  >;
  reads.service = [...tenants];
  reads.tenantService1 = tenants.filter((x) => x === "tenant1");
  reads.tenantService2 = tenants.filter((x) => x === "tenant2");
  // A service key whose tenant_id names no tenant: the grant, and none of the rows.
  reads.tamperedService = [];
  MONEY_READS[`internal.${table}`] = { sql: `internal.${table}`, key: "tenant_id", reads };
}

const MONEY_TABLES = [
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
] as const;
const MONEY_VIEWS = ["payees", "payee_balances", "statements", "payouts"] as const;

/** insert, update and delete of each money table and view, aimed at tenant 1's rows. */
const MONEY_WRITES: { name: string; sql: string; service?: string }[] = [
  ...MONEY_TABLES.flatMap((table) => {
    const column = table === "split_shares" ? "share" : "tenant_id";
    return [
      { name: `insert into internal.${table}`, sql: `insert into internal.${table} default values` },
      {
        name: `update internal.${table}`,
        sql:
          table === "ledger_entries"
            ? "update internal.ledger_entries set amount = amount + 1"
            : table === "statements"
              ? "update internal.statements set closing_balance = closing_balance + 1"
              : `update internal.${table} set ${column} = ${column}`,
        // The ledger is append-only and an approved statement never changes, whoever asks.
        ...(table === "ledger_entries" || table === "statements" ? { service: "55000" } : {}),
      },
      {
        name: `delete from internal.${table}`,
        sql: `delete from internal.${table}`,
        ...(table === "ledger_entries" || table === "statements" ? { service: "55000" } : {}),
      },
    ];
  }),
  ...MONEY_VIEWS.flatMap((view) => [
    { name: `insert into public.${view}`, sql: `insert into public.${view} default values` },
    { name: `update public.${view}`, sql: `update public.${view} set account_id = account_id` },
    { name: `delete from public.${view}`, sql: `delete from public.${view}` },
  ]),
];

describeEachEngine("RLS matrix: money (migration 0036)", (t) => {
  let seeded: World | undefined;
  const claims = new Map<MoneyCaller, Claims>();
  const moneyLabels = new Map<string, string>();

  before(async () => {
    const db = t().db;
    const w = await seedWorld(db, "account-members");
    seeded = w;
    for (const c of CALLERS) claims.set(c, w.claims[c]);
    const { memberA2, memberC } = w.people;
    await db.asService((tx) =>
      tx.query("update internal.users set email_proven_at = now() where id = any ($1::uuid[])", [
        [memberA2.id, memberC.id],
      ]),
    );
    const split = (shares: [string, number][]) =>
      JSON.stringify(shares.map(([email, share]) => ({ name: email, email, share })));
    const delivered = async (account: Account, upc: string, isrcs: string[], splits: (string | null)[]) => {
      const r = await seedDeliveredRelease(
        db,
        account.id,
        { title: `Paid ${upc}`, upc },
        isrcs.map((isrc, i) => ({ title: isrc, isrc, duration: 200, track_number: i + 1 })),
      );
      for (const [i, s] of splits.entries()) {
        if (s)
          await db.asService((tx) =>
            tx.query("update public.tracks set splits = $2 where id = $1", [r.tracks[i]?.id, s]),
          );
      }
      return r;
    };
    const releaseA = await delivered(
      w.accounts.A,
      "012345000010",
      ["QZMTX2600001", "QZMTX2600002"],
      [
        split([
          [memberA2.email, 50],
          ["outsider@matrix.test", 50],
        ]),
        null,
      ],
    );
    await delivered(w.accounts.C, "012345000010", ["QZMTX2600003"], [split([[memberC.email, 100]])]);
    await setFee(db, w.tenants[1].id, {}, "10");
    await updateMoneySettings(db, w.tenants[1].id, { payout_threshold: "1.00" });
    await addRecoupable(
      db,
      w.tenants[1].id,
      {
        account_id: w.accounts.A.id,
        release_id: releaseA.id,
        kind: "expense",
        currency: "USD",
        amount: "1.00",
        description: "Mastering",
      },
      "matrix",
    );
    const report = (isrcs: string[]) =>
      reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          ...isrcs.map((isrc) => `2026-11,2026-10,spotify,US,,${isrc},stream,1000,0,0,20.00,USD`),
          "",
        ].join("\n"),
      );
    for (const [tenant, isrcs] of [
      [w.tenants[1], ["QZMTX2600001", "QZMTX2600002"]],
      [w.tenants[2], ["QZMTX2600003"]],
    ] as const) {
      const r = await importRoyalties(db, {
        tenantId: tenant.id,
        format: "backline",
        file: report([...isrcs]),
      });
      assert.equal(r.status, "completed");
    }
    const period = (
      await db.asService((tx) => tx.query<{ p: string }>("select to_char(now(), 'YYYY-MM') as p"))
    ).rows[0]?.p as string;
    // The period's statements, an exchange rate set for it, and memberA2's payout in a batch.
    await setExchangeRate(db, w.tenants[1].id, { period, from: "EUR", to: "USD", rate: "1.1" });
    await approvePeriod(db, w.tenants[1].id, period, "matrix");
    await approvePeriod(db, w.tenants[2].id, period, "matrix");
    const payees = (
      await db.asService((tx) =>
        tx.query<{ id: string; account_id: string; email: string | null }>(
          "select id, account_id, email from internal.payees where tenant_id = any ($1::uuid[])",
          [[w.tenants[1].id, w.tenants[2].id]],
        ),
      )
    ).rows;
    const who = (email: string | null) =>
      email === null
        ? "self"
        : email === memberA2.email
          ? "memberA2"
          : email === memberC.email
            ? "memberC"
            : (email.split("@")[0] as string);
    for (const p of payees) {
      moneyLabels.set(
        p.id,
        `${p.account_id === w.accounts.A.id ? "A" : p.account_id === w.accounts.C.id ? "C" : "?"}:${who(p.email)}`,
      );
    }
    moneyLabels.set(w.accounts.A.id, "A");
    moneyLabels.set(w.accounts.B.id, "B");
    moneyLabels.set(w.accounts.C.id, "C");
    moneyLabels.set(w.tenants[1].id, "tenant1");
    moneyLabels.set(w.tenants[2].id, "tenant2");
    moneyLabels.set(`${w.tenants[1].id}:books`, "tenant1:books");
    moneyLabels.set(`${w.tenants[2].id}:books`, "tenant2:books");
    const payeeA2 = payees.find((p) => p.email === memberA2.email)?.id as string;
    await fileTaxForm(db, t().db.secrets, payeeA2, {
      form: "W-9",
      name: "A2",
      country: "US",
      tax_id: "123-45-6789",
    });
    await reviewTaxForm(db, w.tenants[1].id, payeeA2, { status: "verified" });
    await setPayoutMethod(db, payeeA2, { provider: "paypal", receiver: memberA2.email });
    await db.withRequestContext({ ...userClaims(memberA2), aal: "aal2" } as Claims, (tx) =>
      requestPayout(tx, payeeA2),
    );
    await approveBatch(db, w.tenants[1].id, "paypal", "matrix");

    const ownerA = await seedUser(db, w.tenants[1], [{ account: w.accounts.A, role: "owner" }]);
    claims.set("ownerA", userClaims(ownerA));
    const key = await issueTestKey(db, w.accounts.A, { scopes: ["payouts:read"] });
    claims.set("payoutsKeyA", {
      role: "authenticated",
      tenant_id: w.tenants[1].id,
      account_id: w.accounts.A.id,
      account_role: "member",
      api_key_id: key.id,
    });
  });
  const world = (): World => {
    if (!seeded) throw new Error("world not seeded");
    return seeded;
  };
  const claimsOf = (caller: MoneyCaller): Claims => {
    const c = claims.get(caller);
    if (!c) throw new Error(`no claims for ${caller}`);
    return c;
  };

  for (const [name, { sql: from, key, reads }] of Object.entries(MONEY_READS)) {
    describe(name, () => {
      for (const caller of MONEY_CALLERS) {
        const expected = reads[caller];
        const want: Observation =
          typeof expected === "string" ? { error: expected } : { visible: [...expected].sort() };
        test(`select as ${caller}: ${describeObservation(want)}`, async () => {
          world();
          const seen = await observing(async () => {
            const r = await t().db.withRequestContext(
              claimsOf(caller),
              (tx) => tx.query<{ k: string }>(`select ${key}::text as k from ${from}`),
              { readOnly: true },
            );
            // This suite's database holds only the matrix's world: every row has a label.
            return {
              visible: [
                ...new Set(r.rows.map((row) => moneyLabels.get(row.k) ?? `unseeded ${row.k}`)),
              ].sort(),
            };
          });
          assert.deepEqual(seen, want);
        });
      }
    });
  }

  describe("writes to the money tables and views", () => {
    for (const write of MONEY_WRITES) {
      for (const caller of MONEY_CALLERS) {
        // The operator writes what the money code writes; only its refusals by rule are asserted.
        if (caller === "service" && !write.service) continue;
        // An aggregate view is not updatable by anyone (55000); every other write lacks the privilege.
        const refusal = write.sql.includes("payee_balances") ? "55000" : DENIED;
        const expected: Observation = { error: caller === "service" ? (write.service as string) : refusal };
        test(`${write.name} as ${caller}: ${describeObservation(expected)}`, async () => {
          world();
          assert.deepEqual(await mutate(t().db, claimsOf(caller), sql(write.sql)), expected);
        });
      }
    }
  });
});

/**
 * storage.buckets and storage.objects (migration 0046; /storage/v1): one bucket per tenant with
 * one folder per account, writers owner/admin/member. Each caller's view and writes, as a matrix:
 * a member reads and writes its account's folder only, a viewer reads it, the tenant's service
 * key (and nobody else) manages buckets and reaches every object of its tenant, anon and the
 * other tenant reach nothing. Writes are rolled back.
 */
describeEachEngine("RLS matrix: storage buckets and objects", (t) => {
  type StorageCaller =
    | "anon"
    | "memberA"
    | "viewerA"
    | "memberB"
    | "keyA"
    | "tenantService"
    | "staffAdmin"
    | "staffReviewer"
    | "tenant2User"
    | "tenant2Service";
  const claims = new Map<StorageCaller, Claims>();
  let tenant1: Tenant;
  let accountA: Account;
  before(async () => {
    const db = t().db;
    tenant1 = await seedTenant(db);
    const tenant2 = await seedTenant(db);
    accountA = await seedAccount(db, tenant1, "A");
    const accountB = await seedAccount(db, tenant1, "B");
    const accountC = await seedAccount(db, tenant2, "C");
    claims.set("anon", anonClaims(tenant1));
    claims.set("memberA", userClaims(await seedUser(db, tenant1, [{ account: accountA, role: "member" }])));
    claims.set("viewerA", userClaims(await seedUser(db, tenant1, [{ account: accountA, role: "viewer" }])));
    claims.set("memberB", userClaims(await seedUser(db, tenant1, [{ account: accountB, role: "member" }])));
    claims.set("keyA", keyClaims(accountA, "member"));
    claims.set("tenantService", tenantServiceClaims(tenant1));
    claims.set("staffAdmin", userClaims(await seedStaffUser(db, tenant1, [{ of: tenant1, role: "admin" }])));
    claims.set(
      "staffReviewer",
      userClaims(await seedStaffUser(db, tenant1, [{ of: tenant1, role: "reviewer" }])),
    );
    claims.set(
      "tenant2User",
      userClaims(await seedUser(db, tenant2, [{ account: accountC, role: "owner" }])),
    );
    claims.set("tenant2Service", tenantServiceClaims(tenant2));
    await db.asService(async (tx) => {
      for (const [tenant, account] of [
        [tenant1, accountA],
        [tenant1, accountB],
        [tenant2, accountC],
      ] as const) {
        await tx.query(
          "insert into storage.buckets (tenant_id, id, folder_per_account) values ($1, 'press', true) on conflict do nothing",
          [tenant.id],
        );
        await tx.query(
          `insert into storage.objects (tenant_id, bucket_id, name, object_key)
           values ($1::uuid, 'press', $2 || '/photo.jpg', 'objects/' || $1::text || '/' || gen_random_uuid())`,
          [tenant.id, account.id],
        );
      }
    });
  });

  const visible: Record<StorageCaller, { objects: number; buckets: number }> = {
    anon: { objects: -1, buckets: -1 }, // no privilege at all
    memberA: { objects: 1, buckets: 1 },
    viewerA: { objects: 1, buckets: 1 },
    memberB: { objects: 1, buckets: 1 },
    keyA: { objects: 1, buckets: 1 },
    tenantService: { objects: 2, buckets: 1 },
    staffAdmin: { objects: 2, buckets: 1 },
    staffReviewer: { objects: 0, buckets: 1 },
    tenant2User: { objects: 1, buckets: 1 },
    tenant2Service: { objects: 1, buckets: 1 },
  };

  async function attempt(caller: StorageCaller, sql: string, params: unknown[]): Promise<string | number> {
    try {
      return await t().db.withRequestContext(claims.get(caller) as Claims, async (tx) => {
        const r = await tx.query(sql, params);
        // Roll the write back: the matrix only observes.
        throw Object.assign(new Error("rollback"), { rows: r.rowCount ?? r.rows.length });
      });
    } catch (error) {
      const rows = (error as { rows?: number }).rows;
      if (rows !== undefined) return rows;
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  for (const caller of Object.keys(visible) as StorageCaller[]) {
    test(`${caller}: sees ${visible[caller].objects} objects and ${visible[caller].buckets} buckets`, async () => {
      const objects = await attempt(caller, "select name from storage.objects where tenant_id = $1 or true", [
        tenant1.id,
      ]);
      const buckets = await attempt(caller, "select id from storage.buckets", []);
      const want = visible[caller];
      assert.equal(objects, want.objects === -1 ? "42501" : want.objects);
      assert.equal(buckets, want.buckets === -1 ? "42501" : want.buckets);
    });

    // Writes into account A's folder of tenant 1's bucket.
    const writesA = ["memberA", "keyA", "tenantService", "staffAdmin"].includes(caller);
    test(`${caller}: ${writesA ? "may" : "may not"} write into account A's folder`, async () => {
      const insert = await attempt(
        caller,
        `insert into storage.objects (tenant_id, bucket_id, name, object_key)
         values ($1::uuid, 'press', $2 || '/new.jpg', 'objects/' || $1::text || '/' || gen_random_uuid())`,
        [tenant1.id, accountA.id],
      );
      if (writesA) assert.equal(insert, 1);
      else assert.ok(["42501"].includes(String(insert)), `insert: ${insert}`);
      const update = await attempt(
        caller,
        "update storage.objects set name = name || '.old' where tenant_id = $1 and name = $2 || '/photo.jpg'",
        [tenant1.id, accountA.id],
      );
      const del = await attempt(
        caller,
        "delete from storage.objects where tenant_id = $1 and name = $2 || '/photo.jpg'",
        [tenant1.id, accountA.id],
      );
      if (caller === "anon") {
        assert.equal(update, "42501");
        assert.equal(del, "42501");
      } else {
        assert.equal(update, writesA ? 1 : 0);
        assert.equal(del, writesA ? 1 : 0);
      }
    });

    const manages = caller === "tenantService" || caller === "staffAdmin";
    test(`${caller}: ${manages ? "manages" : "does not manage"} tenant 1's buckets`, async () => {
      const made = await attempt(caller, "insert into storage.buckets (tenant_id, id) values ($1, 'new')", [
        tenant1.id,
      ]);
      assert.equal(made, manages ? 1 : "42501");
      const changed = await attempt(caller, "update storage.buckets set public = true where tenant_id = $1", [
        tenant1.id,
      ]);
      assert.equal(changed, manages ? 1 : caller === "anon" ? "42501" : 0);
    });
  }
});

// The support desk (migration 0049): seed 000's internal tickets and ticket_replies, outside the
// table interface but granted to `authenticated` for the public API's queries. A member or key
// reads its account's tickets and their public replies, never an internal note; staff (reviewer
// and up) read their token's tenant's, notes included; tenant_service and anon nothing. Members
// write only new tickets and replies of their account, never a note, and change nothing after.
describeEachEngine("RLS matrix: the support desk (migration 0049)", (t) => {
  let seeded: World | undefined;
  const labels = new Map<string, string>();
  before(async () => {
    const w = await seedWorld(t().db, "account-members");
    seeded = w;
    await t().db.asService(async (tx) => {
      for (const [group, account, opener] of [
        ["A", w.accounts.A, w.people.memberA],
        ["B", w.accounts.B, w.people.memberB],
        ["C", w.accounts.C, w.people.memberC],
      ] as const) {
        const ticket = (
          await tx.query<{ id: string }>(
            "insert into internal.tickets (account_id, subject, opened_by) values ($1, $2, $3) returning id",
            [account.id, `Ticket ${group}`, opener.id],
          )
        ).rows[0]?.id as string;
        labels.set(ticket, `ticket ${group}`);
        for (const internal of [false, true]) {
          const reply = (
            await tx.query<{ id: string }>(
              `insert into internal.ticket_replies (ticket_id, body, author_staff, is_internal)
               values ($1, 'x', $2, $3) returning id`,
              [ticket, internal ? "staff@matrix.test" : null, internal],
            )
          ).rows[0]?.id as string;
          labels.set(reply, `${internal ? "note" : "reply"} ${group}`);
        }
      }
    });
  });
  const world = (): World => {
    if (!seeded) throw new Error("world not seeded");
    return seeded;
  };
  const ticketOf = (group: string) => [...labels].find(([, l]) => l === `ticket ${group}`)?.[0] as string;

  /** The labels of the rows a caller reads, or the refusal's SQLSTATE. */
  async function read(caller: Caller, sql: string): Promise<string[] | string> {
    try {
      const rows = await t().db.withRequestContext(
        world().claims[caller],
        async (tx) => (await tx.query<{ id: string }>(sql)).rows,
      );
      return rows.map((r) => labels.get(r.id) ?? r.id).sort();
    } catch (error) {
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  /** A write, rolled back: the rows it changed, or the refusal's SQLSTATE. */
  async function write(caller: Caller, sql: string, params: unknown[] = []): Promise<string> {
    try {
      await t().db.withRequestContext(world().claims[caller], async (tx) => {
        const result = await tx.query(sql, params);
        throw Object.assign(new Error("rollback"), { rows: result.rowCount });
      });
      return "committed";
    } catch (error) {
      const rows = (error as { rows?: number }).rows;
      if (rows !== undefined) return rows === 0 ? "no rows" : `changed ${rows}`;
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  const A = ["ticket A"];
  const TICKETS: Record<Caller, string[] | string> = {
    anon: DENIED,
    memberA: A,
    memberA2: A,
    memberB: ["ticket B"],
    viewerA: A,
    tenant2User: ["ticket C"],
    keyA: A,
    viewerKeyA: A,
    service: ["ticket A", "ticket B", "ticket C"],
    tenantService1: DENIED,
    tenantService2: DENIED,
    tamperedUser: [],
    tamperedKey: [],
    tamperedService: DENIED,
    reviewer1: ["ticket A", "ticket B"],
    operator1: ["ticket A", "ticket B"],
    // Platform staff, signed in on tenant 2: that tenant's tickets.
    platformOperator: ["ticket C"],
    unprovenReviewer1: [],
  };
  /** A ticket's label -> its replies' labels the caller reads: the notes for staff only. */
  const repliesFor = (caller: Caller, tickets: string[] | string): string[] | string => {
    if (typeof tickets === "string") return tickets;
    const staff = STAFF.includes(caller as StaffCaller) || caller === "service";
    return tickets
      .flatMap((t) => {
        const g = t.slice("ticket ".length);
        return staff ? [`note ${g}`, `reply ${g}`] : [`reply ${g}`];
      })
      .sort();
  };
  const WRITES_A = new Set<Caller>(["memberA", "memberA2", "keyA", "service"]);

  for (const caller of CALLERS) {
    describe(`support desk as ${caller}`, () => {
      test(`reads tickets: ${JSON.stringify(TICKETS[caller])}`, async () => {
        assert.deepEqual(await read(caller, "select id from internal.tickets"), TICKETS[caller]);
      });
      test(`reads replies: ${JSON.stringify(repliesFor(caller, TICKETS[caller]))}`, async () => {
        assert.deepEqual(
          await read(caller, "select id from internal.ticket_replies"),
          repliesFor(caller, TICKETS[caller]),
        );
      });
      const files = WRITES_A.has(caller);
      test(`${files ? "files" : "cannot file"} a ticket and a reply for account A`, async () => {
        const w = world();
        assert.equal(
          await write(caller, "insert into internal.tickets (account_id, subject) values ($1, 'New')", [
            w.accounts.A.id,
          ]),
          files ? "changed 1" : DENIED,
        );
        assert.equal(
          await write(caller, "insert into internal.ticket_replies (ticket_id, body) values ($1, 'More')", [
            ticketOf("A"),
          ]),
          files ? "changed 1" : DENIED,
        );
      });
      if (caller !== "service") {
        test("writes no note, and changes or deletes no ticket or reply", async () => {
          assert.equal(
            await write(
              caller,
              "insert into internal.ticket_replies (ticket_id, body, is_internal) values ($1, 'x', true)",
              [ticketOf("A")],
            ),
            DENIED,
          );
          for (const sql of [
            "update internal.tickets set status = 'solved'",
            "delete from internal.tickets",
            "update internal.ticket_replies set body = 'changed'",
            "delete from internal.ticket_replies",
          ]) {
            assert.equal(await write(caller, sql), DENIED, sql);
          }
        });
      }
    });
  }
});

// Add-ons (migration 0051): seed 000's internal add_on_settings, now the tenant's catalogue, and
// add_on_orders. A member or key of the tenant reads its add-ons on sale (never one off sale, never
// another tenant's) and the orders of the releases it sees; tenant_service its tenant's whole
// catalogue and orders; no client writes either table. Buying goes through internal.buy_add_on:
// whoever may change the release (member, not a viewer; a key with catalog:write), nobody else.
describeEachEngine("RLS matrix: add-ons (migration 0051)", (t) => {
  let seeded: World | undefined;
  const labels = new Map<string, string>();
  before(async () => {
    const w = await seedWorld(t().db, "account-members");
    seeded = w;
    await t().db.asService(async (tx) => {
      for (const [tenant, code, enabled] of [
        [w.tenants[1], "on_sale", true],
        [w.tenants[1], "off_sale", false],
        [w.tenants[2], "theirs", true],
      ] as const) {
        await tx.query(
          `insert into internal.add_on_settings (tenant_id, add_on, name, price, currency, enabled)
           values ($1, $2, $2, '1.00', 'USD', $3)`,
          [tenant.id, code, enabled],
        );
        labels.set(code, code);
      }
      for (const group of ["A", "A2", "B", "C"] as const) {
        const code = group === "C" ? "theirs" : "on_sale";
        const r = await tx.query<{ order_id: string }>("select order_id from internal.buy_add_on($1, $2)", [
          w.catalog[group].draft,
          code,
        ]);
        labels.set(r.rows[0]?.order_id as string, `order ${group}`);
      }
    });
  });
  const world = (): World => {
    if (!seeded) throw new Error("world not seeded");
    return seeded;
  };

  /** The labels of the rows a caller reads, or the refusal's SQLSTATE. */
  async function read(caller: Caller, sql: string): Promise<string[] | string> {
    try {
      const rows = await t().db.withRequestContext(
        world().claims[caller],
        async (tx) => (await tx.query<{ id: string }>(sql)).rows,
      );
      return rows.map((r) => labels.get(r.id) ?? r.id).sort();
    } catch (error) {
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  /** A statement, rolled back: "ok" or the refusal's SQLSTATE. */
  async function attempt(caller: Caller, sql: string, params: unknown[] = []): Promise<string> {
    try {
      await t().db.withRequestContext(world().claims[caller], async (tx) => {
        const r = await tx.query(sql, params);
        throw Object.assign(new Error("rollback"), { rows: r.rowCount });
      });
      return "committed";
    } catch (error) {
      const rows = (error as { rows?: number }).rows;
      if (rows !== undefined) return rows === 0 ? "no rows" : `changed ${rows}`;
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  const A = ["order A", "order A2"];
  const SEES: Record<Caller, [string[] | string, string[] | string]> = {
    anon: [DENIED, DENIED],
    memberA: [["on_sale"], A],
    memberA2: [["on_sale"], A],
    memberB: [["on_sale"], ["order B"]],
    viewerA: [["on_sale"], A],
    tenant2User: [["theirs"], ["order C"]],
    keyA: [["on_sale"], A],
    viewerKeyA: [["on_sale"], A],
    service: [
      ["off_sale", "on_sale", "theirs"],
      ["order A", "order A2", "order B", "order C"],
    ],
    tenantService1: [
      ["off_sale", "on_sale"],
      ["order A", "order A2", "order B"],
    ],
    tenantService2: [["theirs"], ["order C"]],
    tamperedUser: [[], []],
    tamperedKey: [[], []],
    tamperedService: [[], []],
    reviewer1: [[], []],
    operator1: [[], []],
    platformOperator: [[], []],
    unprovenReviewer1: [[], []],
  };
  const BUYS = new Set<Caller>(["memberA", "memberA2", "keyA", "service"]);

  for (const caller of CALLERS) {
    describe(`add-ons as ${caller}`, () => {
      const [catalogue, orders] = SEES[caller];
      test(`reads add-ons ${JSON.stringify(catalogue)} and orders ${JSON.stringify(orders)}`, async () => {
        assert.deepEqual(await read(caller, "select add_on as id from internal.add_on_settings"), catalogue);
        assert.deepEqual(await read(caller, "select id from internal.add_on_orders"), orders);
      });
      if (caller !== "service") {
        test("writes neither table", async () => {
          const w = world();
          for (const [sql, params] of [
            [
              "insert into internal.add_on_settings (tenant_id, add_on, name, price, currency) values ($1, 'mine', 'Mine', 0, 'USD')",
              [w.tenants[1].id],
            ],
            ["update internal.add_on_settings set price = 0", []],
            ["delete from internal.add_on_settings", []],
            [
              `insert into internal.add_on_orders (tenant_id, account_id, release_id, add_on, name, effect, billing, currency, price)
               values ($1, $2, $3, 'on_sale', 'x', 'informational', 'per_release', 'USD', 0)`,
              [w.tenants[1].id, w.accounts.A.id, w.catalog.A.live],
            ],
            ["update internal.add_on_orders set price = 0", []],
            ["delete from internal.add_on_orders", []],
          ] as const) {
            const r = await attempt(caller, sql, [...params]);
            assert.ok(r === DENIED || r === "no rows", `${sql}: ${r}`);
          }
        });
      }
      const buys = BUYS.has(caller);
      test(`${buys ? "buys" : "cannot buy"} an add-on for account A's release`, async () => {
        const r = await attempt(caller, "select * from internal.buy_add_on($1, 'on_sale')", [
          world().catalog.A.live,
        ]);
        if (buys) assert.equal(r, "changed 1");
        else assert.ok(["42501", "P0002"].includes(r), `refused: ${r}`);
      });
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Migration 0053: seed 000's partners and custom scripts, and partner_tenants. Only the service
// path (the admin API inside the operator scope) reaches them: no request role reads or writes a
// row, staff and a tenant's own service-role key included.
// ---------------------------------------------------------------------------------------------
describeEachEngine("RLS matrix: partners and custom scripts (migration 0053)", (t) => {
  let seeded: World | undefined;
  before(async () => {
    seeded = await seedWorld(t().db, "account-members");
    const w = seeded;
    await t().db.asService(async (tx) => {
      await tx.query(
        "insert into internal.custom_scripts (tenant_id, name, source, enabled) values ($1, 'Stats', 'https://stats.example.com/s.js', true)",
        [w.tenants[1].id],
      );
      const partner = (
        await tx.query<{ id: string }>(
          "insert into internal.partners (name, kind, revenue_share) values ('Referrer', 'reseller', 10) returning id",
        )
      ).rows[0]?.id;
      await tx.query("insert into internal.partner_tenants (tenant_id, partner_id) values ($1, $2)", [
        w.tenants[1].id,
        partner,
      ]);
    });
  });

  async function attempt(caller: Caller, sql: string): Promise<string> {
    if (!seeded) throw new Error("world not seeded");
    try {
      const n = await t().db.withRequestContext(seeded.claims[caller], async (tx) => {
        const r = await tx.query(sql);
        throw Object.assign(new Error("rollback"), { n: r.rowCount });
      });
      return `ok ${String(n)}`;
    } catch (error) {
      const n = (error as { n?: number }).n;
      if (n !== undefined) return `rows ${n}`;
      return asDbError(error)?.sqlstate ?? String(error);
    }
  }

  const STATEMENTS: Record<string, string[]> = {
    "internal.custom_scripts": [
      "select * from internal.custom_scripts",
      "update internal.custom_scripts set enabled = true",
      "delete from internal.custom_scripts",
      "insert into internal.custom_scripts (tenant_id, name, source) select id, 'X', 'https://x.example.com/x.js' from internal.tenants",
    ],
    "internal.partners": [
      "select * from internal.partners",
      "update internal.partners set revenue_share = 100",
      "delete from internal.partners",
      "insert into internal.partners (name, kind, revenue_share) values ('Mine', 'reseller', 100)",
    ],
    "internal.partner_tenants": [
      "select * from internal.partner_tenants",
      "update internal.partner_tenants set since = '2000-01-01'",
      "delete from internal.partner_tenants",
    ],
  };

  for (const [table, statements] of Object.entries(STATEMENTS)) {
    describe(table, () => {
      for (const caller of CALLERS) {
        test(`${caller}: ${caller === "service" ? "reaches it" : "refused (42501)"}`, async () => {
          for (const sql of statements) {
            const r = await attempt(caller, sql);
            // service_role: every row (deleting a partner that has tenants is the foreign key's
            // refusal: 23001 restrict_violation, or 23503 where the check is deferred to statement end).
            if (caller === "service")
              assert.ok(/^rows [1-9]/.test(r) || ["23001", "23503"].includes(r), `${sql}: ${r}`);
            else assert.equal(r, "42501", `${caller}: ${sql}`);
          }
        });
      }
    });
  }
});
