import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import type { Claims } from "../src/db/types.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import {
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
 * The catalog's state rules, enforced as triggers (migration 0005), met as a logged-in member, a
 * public-API key, a tenant's own service-role key (tenant_service) and the operator's service role.
 * Every test seeds its own tenant, so no test depends on another's rows.
 */

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

/** Where an account may still edit a release and its tracks. */
const EDITABLE: readonly Status[] = ["draft", "pending", "rejected"];
/** A release that went to no store yet may still be deleted (withdrawn), also while in review. */
const NEVER_DELIVERED: readonly Status[] = [
  "draft",
  "pending",
  "submitted",
  "in_review",
  "approved",
  "rejected",
];
/** Everything from submitted on, rejected excepted: the operator's. */
const LOCKED = STATUSES.filter((s) => !EDITABLE.includes(s));
/** Where an account may move an editable release. */
const USER_TARGETS: readonly Status[] = ["draft", "pending", "submitted"];
/** The statuses only the operator sets. */
const OPERATOR_TARGETS = STATUSES.filter((s) => !USER_TARGETS.includes(s));
/** What a takedown can be asked for. */
const TAKEDOWN_ALLOWED: readonly Status[] = ["delivered", "live"];

type Row = Record<string, unknown>;
type MembershipRole = "owner" | "admin" | "member" | "viewer";

interface ReleaseRow {
  id: string;
  account_id: string;
  artist_id: string;
  title: string;
  artist_name: string | null;
  status: Status;
  status_reason: string | null;
  submitted_at: Date | null;
  created_by: string | null;
}

interface Member {
  tenant: Tenant;
  account: Account;
  user: SeedUser;
  claims: Claims;
}

// ---------------------------------------------------------------------------------------------
// Running statements

async function query<R = Row>(db: Db, claims: Claims, text: string, params: unknown[] = []): Promise<R[]> {
  return db.withRequestContext(claims, async (tx) => (await tx.query<R>(text, params)).rows);
}

/** An INSERT of `values` into public.`table` (names are the test's own constants). */
function insertSql(table: string, values: Row): [string, unknown[]] {
  const columns = Object.keys(values);
  const placeholders = columns.map((_, i) => `$${i + 1}`);
  return [
    `insert into public.${table} (${columns.join(", ")}) values (${placeholders.join(", ")}) returning *`,
    Object.values(values),
  ];
}

async function insertRow<R = Row>(
  db: Db,
  claims: Claims,
  table: string,
  values: Row,
): Promise<R & { id: string }> {
  const [row] = await query<R & { id: string }>(db, claims, ...insertSql(table, values));
  if (!row) throw new Error(`insert into ${table} returned no row`);
  return row;
}

/**
 * Runs one statement as `claims` in its own transaction and says how it went: 'ok' when it changed
 * at least one row, 'no rows' when it changed none, else the SQLSTATE it failed with.
 */
async function attempt(db: Db, claims: Claims, text: string, params: unknown[] = []): Promise<string> {
  try {
    const r = await db.withRequestContext(claims, (tx) => tx.query(text, params));
    return r.rowCount > 0 ? "ok" : "no rows";
  } catch (error) {
    const sqlstate = asDbError(error)?.sqlstate;
    if (!sqlstate) throw error;
    return sqlstate;
  }
}

/** How `run`, which must fail, failed: the SQLSTATE, and the column the error names. */
async function failureOf(
  run: () => Promise<unknown>,
): Promise<{ sqlstate: string; column: string | undefined }> {
  try {
    await run();
  } catch (error) {
    const e = asDbError(error);
    if (!e) throw error;
    return { sqlstate: e.sqlstate, column: e.column };
  }
  throw new Error("expected the statement to fail");
}

// ---------------------------------------------------------------------------------------------
// Seeding

/** A user who is a member of one account of a tenant (a fresh tenant unless one is given). */
async function seedMember(db: Db, tenant?: Tenant): Promise<Member> {
  const home = tenant ?? (await seedTenant(db));
  const account = await seedAccount(db, home);
  const user = await seedUser(db, home, [{ account }]);
  return { tenant: home, account, user, claims: userClaims(user) };
}

/** Gives `member` a further account of their tenant; `daysAgo` backdates the membership. */
async function joinAccount(
  db: Db,
  member: Member,
  role: MembershipRole = "member",
  daysAgo = 0,
): Promise<Account> {
  const account = await seedAccount(db, member.tenant, `Label ${role}`);
  await query(
    db,
    serviceClaims,
    `insert into internal.memberships (tenant_id, account_id, user_id, role, created_at)
     values ($1, $2, $3, $4, now() - make_interval(days => $5))`,
    [member.tenant.id, account.id, member.user.id, role, daysAgo],
  );
  return account;
}

async function setDefaultAccount(db: Db, member: Member, account: Account): Promise<void> {
  await query(db, serviceClaims, "update internal.users set default_account_id = $2 where id = $1", [
    member.user.id,
    account.id,
  ]);
}

async function createArtist(db: Db, claims: Claims, accountId?: string): Promise<string> {
  const artist = await insertRow(db, claims, "artist_profiles", {
    name: "Night Owl",
    ...(accountId ? { account_id: accountId } : {}),
  });
  return artist.id;
}

/** A fresh release created as a draft by `claims` (in `accountId` if given), then moved to `status` by the operator. */
async function seedRelease(
  db: Db,
  claims: Claims,
  status: Status = "draft",
  accountId?: string,
): Promise<ReleaseRow> {
  const artistId = await createArtist(db, claims, accountId);
  const release = await insertRow<ReleaseRow>(db, claims, "releases", {
    artist_id: artistId,
    title: "First Light",
  });
  if (status !== "draft") await forceReleaseStatus(db, release.id, status);
  return { ...release, status };
}

async function setStatus(db: Db, claims: Claims, releaseId: string, status: Status): Promise<ReleaseRow> {
  const [row] = await query<ReleaseRow>(
    db,
    claims,
    "update public.releases set status = $2 where id = $1 returning *",
    [releaseId, status],
  );
  if (!row) throw new Error(`release ${releaseId} was not updated`);
  return row;
}

/** Sets a rejection (or any operator) reason with the status, on the service path. */
async function setStatusWithReason(db: Db, releaseId: string, status: Status, reason: string): Promise<void> {
  await query(db, serviceClaims, "update public.releases set status = $2, status_reason = $3 where id = $1", [
    releaseId,
    status,
    reason,
  ]);
}

async function readRelease(db: Db, releaseId: string): Promise<ReleaseRow | undefined> {
  const [row] = await query<ReleaseRow>(db, serviceClaims, "select * from public.releases where id = $1", [
    releaseId,
  ]);
  return row;
}

// ---------------------------------------------------------------------------------------------
// Reading the outbox (internal tables, on the service path)

function historyOf(db: Db, releaseId: string): Promise<Row[]> {
  return query(
    db,
    serviceClaims,
    `select from_status, to_status, reason, actor_role, actor_user_id, actor_api_key_id
     from internal.release_history where release_id = $1 order by id`,
    [releaseId],
  );
}

/** Jobs of `kind` whose payload has `field` = `value`. */
function jobsOf(db: Db, kind: string, field: string, value: string): Promise<Row[]> {
  return query(
    db,
    serviceClaims,
    "select kind, payload, status from internal.jobs where kind = $1 and payload ->> $2 = $3 order by id",
    [kind, field, value],
  );
}

/** Events about a release; `is_release_row` says data.object is the release exactly as stored. */
function eventsOf(db: Db, releaseId: string): Promise<Row[]> {
  return query(
    db,
    serviceClaims,
    `select e.type, e.tenant_id, e.account_id,
            e.data -> 'object' = (select to_jsonb(r) from public.releases r where r.id = $1) as is_release_row
     from internal.events e where e.data -> 'object' ->> 'id' = $1::text order by e.created_at, e.id`,
    [releaseId],
  );
}

// ---------------------------------------------------------------------------------------------
// The catalog tables whose rows hang off a parent row

interface ChildTable {
  table: string;
  values: Row;
  parent: {
    noun: string;
    column: string;
    /** Creates a parent row in `accountId` as `claims` and returns its id. */
    create: (db: Db, claims: Claims, accountId: string) => Promise<string>;
  };
}

const ARTIST_PROFILES = { table: "artist_profiles", values: { name: "Night Owl" } };

const CHILD_TABLES: ChildTable[] = [
  {
    table: "releases",
    values: { title: "First Light" },
    parent: { noun: "artist", column: "artist_id", create: createArtist },
  },
  {
    table: "tracks",
    values: { title: "Intro" },
    parent: {
      noun: "release",
      column: "release_id",
      create: async (db, claims, accountId) => (await seedRelease(db, claims, "draft", accountId)).id,
    },
  },
  {
    table: "takedown_requests",
    values: { reason: "Rights dispute" },
    parent: {
      noun: "live release",
      column: "release_id",
      create: async (db, claims, accountId) => (await seedRelease(db, claims, "live", accountId)).id,
    },
  },
];

/** Inserts a row of `table` as `claims`, creating its parent (if it has one) in `member`'s account first. */
async function insertCatalogRow(
  db: Db,
  member: Member,
  claims: Claims,
  table: { table: string; values: Row; parent?: ChildTable["parent"] },
  extra: Row = {},
): Promise<Row> {
  const parent = table.parent
    ? { [table.parent.column]: await table.parent.create(db, member.claims, member.account.id) }
    : {};
  return insertRow(db, claims, table.table, { ...table.values, ...parent, ...extra });
}

// ---------------------------------------------------------------------------------------------

describeEachEngine("catalog rules", (t) => {
  const db = () => t().db;

  describe("release status transitions", () => {
    for (const status of STATUSES) {
      const expected = status === "draft" || status === "pending" ? "ok" : "BL002";
      test(`a member creates a release as ${status}: ${expected}`, async () => {
        const m = await seedMember(db());
        const artistId = await createArtist(db(), m.claims);
        const create = insertSql("releases", { artist_id: artistId, title: "First Light", status });
        assert.equal(await attempt(db(), m.claims, ...create), expected);
      });
    }

    for (const from of EDITABLE) {
      for (const to of STATUSES.filter((s) => s !== from)) {
        const expected = USER_TARGETS.includes(to) ? "ok" : "BL002";
        test(`a member moves a ${from} release to ${to}: ${expected}`, async () => {
          const m = await seedMember(db());
          const release = await seedRelease(db(), m.claims, from);
          const move = "update public.releases set status = $2 where id = $1";
          assert.equal(await attempt(db(), m.claims, move, [release.id, to]), expected);
          assert.equal((await readRelease(db(), release.id))?.status, expected === "ok" ? to : from);
        });
      }
    }

    for (const status of LOCKED) {
      const deletion = NEVER_DELIVERED.includes(status) ? "ok" : "BL001";
      test(`a ${status} release is closed to its account: update and status change -> BL001, delete -> ${deletion}`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims, status);
        const onRelease = (text: string) => attempt(db(), m.claims, text, [release.id]);
        const outcomes = {
          title: await onRelease("update public.releases set title = 'Renamed' where id = $1"),
          status: await onRelease("update public.releases set status = 'draft' where id = $1"),
          delete: await onRelease("delete from public.releases where id = $1"),
        };
        assert.deepEqual(outcomes, { title: "BL001", status: "BL001", delete: deletion });
      });
    }

    for (const status of EDITABLE) {
      test(`a member deletes a ${status} release`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims, status);
        assert.equal(
          await attempt(db(), m.claims, "delete from public.releases where id = $1", [release.id]),
          "ok",
        );
        assert.equal(await readRelease(db(), release.id), undefined);
      });
    }

    for (const status of STATUSES.filter((s) => s !== "draft")) {
      test(`the service role moves a release draft -> ${status} -> draft`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims);
        assert.equal((await setStatus(db(), serviceClaims, release.id, status)).status, status);
        assert.equal((await setStatus(db(), serviceClaims, release.id, "draft")).status, "draft");
      });
    }
  });

  describe("side effects of a status change", () => {
    const ACTORS: {
      name: string;
      claims: (m: Member) => Claims;
      recorded: (m: Member, claims: Claims) => Row;
    }[] = [
      {
        name: "a member",
        claims: (m) => m.claims,
        recorded: (m) => ({ actor_role: "authenticated", actor_user_id: m.user.id, actor_api_key_id: null }),
      },
      {
        name: "a public-API key",
        claims: (m) => keyClaims(m.account),
        recorded: (_m, claims) => ({
          actor_role: "authenticated",
          actor_user_id: null,
          actor_api_key_id: claims.api_key_id,
        }),
      },
      {
        name: "the service role",
        claims: () => serviceClaims,
        recorded: () => ({ actor_role: "service_role", actor_user_id: null, actor_api_key_id: null }),
      },
    ];

    for (const actor of ACTORS) {
      test(`release_history records ${actor.name} creating and submitting a release`, async () => {
        const m = await seedMember(db());
        const claims = actor.claims(m);
        const release = await seedRelease(db(), claims, "draft", m.account.id);
        await setStatus(db(), claims, release.id, "submitted");
        const who = actor.recorded(m, claims);
        assert.deepEqual(await historyOf(db(), release.id), [
          { from_status: null, to_status: "draft", reason: null, ...who },
          { from_status: "draft", to_status: "submitted", reason: null, ...who },
        ]);
      });
    }

    test("one statement creating many releases records each in the history and the audit log as one at a time does", async () => {
      const m = await seedMember(db());
      const artistId = await createArtist(db(), m.claims);
      const one = await insertRow<ReleaseRow>(db(), m.claims, "releases", {
        artist_id: artistId,
        title: "One",
      });
      const many = (
        await query<{ id: string }>(
          db(),
          m.claims,
          "insert into public.releases (artist_id, title) select $1, 'Many ' || g from generate_series(1, 5) g returning id",
          [artistId],
        )
      ).map((r) => r.id);
      const who = { actor_role: "authenticated", actor_user_id: m.user.id, actor_api_key_id: null };
      for (const id of [one.id, ...many])
        assert.deepEqual(await historyOf(db(), id), [
          { from_status: null, to_status: "draft", reason: null, ...who },
        ]);
      // Each history row's audit row: the same in every column but the row's own ids and time.
      const audited = await query<Row & { object_id: string; history_id: string; release_id: string }>(
        db(),
        serviceClaims,
        `select l.tenant_id, l.actor_type, l.actor, l.actor_detail, l.ip, l.action, l.object_table, l.before,
           l.after - 'id' - 'release_id' - 'created_at' as after, l.object_id, h.id::text as history_id,
           h.release_id::text as release_id
         from internal.audit_log l join internal.release_history h on h.id::text = l.object_id
         where l.object_table = 'internal.release_history' and h.release_id = any ($1::uuid[]) order by l.id`,
        [[one.id, ...many]],
      );
      assert.deepEqual(
        audited.map((a) => a.release_id),
        [one.id, ...many],
      );
      const strip = ({ object_id: _o, history_id: _h, release_id: _r, ...rest }: (typeof audited)[number]) =>
        rest;
      const [first, ...rest] = audited.map(strip);
      assert.equal(first?.actor_type, "user");
      assert.equal(first?.tenant_id, m.tenant.id);
      for (const row of rest) assert.deepEqual(row, first);
      // The server's own work is not an act to record: the service path writes history, no audit.
      const [byService] = await query<{ id: string }>(
        db(),
        serviceClaims,
        "insert into public.releases (account_id, artist_id, title) select $1, $2, 'By the server' returning id",
        [m.account.id, artistId],
      );
      assert.equal((await historyOf(db(), byService?.id ?? "")).length, 1);
      const none = await query(
        db(),
        serviceClaims,
        "select 1 from internal.audit_log l join internal.release_history h on h.id::text = l.object_id where l.object_table = 'internal.release_history' and h.release_id = $1",
        [byService?.id],
      );
      assert.equal(none.length, 0);
    });

    test("submitting sets submitted_at, queues release.review and emits release.submitted", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      assert.equal(release.submitted_at, null);
      const submitted = await setStatus(db(), m.claims, release.id, "submitted");
      assert.ok(submitted.submitted_at instanceof Date, "submitted_at is set");
      assert.deepEqual(await jobsOf(db(), "release.review", "release_id", release.id), [
        { kind: "release.review", payload: { release_id: release.id }, status: "queued" },
      ]);
      assert.deepEqual(await eventsOf(db(), release.id), [
        { type: "release.submitted", tenant_id: m.tenant.id, account_id: m.account.id, is_release_row: true },
      ]);
    });

    test("a resubmission after a rejection, while the review job is still queued, queues no second job", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      await setStatus(db(), m.claims, release.id, "submitted");
      await setStatusWithReason(db(), release.id, "rejected", "Cover art is blurry");
      await setStatus(db(), m.claims, release.id, "submitted");
      assert.deepEqual(await jobsOf(db(), "release.review", "release_id", release.id), [
        { kind: "release.review", payload: { release_id: release.id }, status: "queued" },
      ]);
    });

    test("a resubmission after the first review job finished queues a new one", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      await setStatus(db(), m.claims, release.id, "submitted");
      await query(
        db(),
        serviceClaims,
        "update internal.jobs set status = 'succeeded', finished_at = now() where kind = 'release.review' and payload ->> 'release_id' = $1",
        [release.id],
      );
      await setStatusWithReason(db(), release.id, "rejected", "Cover art is blurry");
      await setStatus(db(), m.claims, release.id, "submitted");
      const jobs = await jobsOf(db(), "release.review", "release_id", release.id);
      assert.deepEqual(
        jobs.map((j) => j.status),
        ["succeeded", "queued"],
      );
    });

    const EVENTS: [Status, string | null][] = [
      ["submitted", "release.submitted"],
      ["approved", "release.approved"],
      ["rejected", "release.rejected"],
      ["live", "release.live"],
      ["taken_down", "release.takedown_completed"],
      ["pending", null],
      ["in_review", null],
      ["delivering", null],
      ["delivered", null],
      ["takedown_requested", null],
    ];
    for (const [status, type] of EVENTS) {
      test(`moving a release to ${status} emits ${type ?? "no event"}`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims);
        await forceReleaseStatus(db(), release.id, status);
        const expected = type
          ? [{ type, tenant_id: m.tenant.id, account_id: m.account.id, is_release_row: true }]
          : [];
        assert.deepEqual(await eventsOf(db(), release.id), expected);
      });
    }

    for (const to of ["submitted", "draft"] as const) {
      test(`a member moving a rejected release to ${to} clears the rejection reason`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims);
        await setStatus(db(), m.claims, release.id, "submitted");
        await setStatusWithReason(db(), release.id, "rejected", "Cover art is blurry");
        assert.equal((await readRelease(db(), release.id))?.status_reason, "Cover art is blurry");
        const moved = await setStatus(db(), m.claims, release.id, to);
        assert.equal(moved.status_reason, null);
        const history = await historyOf(db(), release.id);
        assert.deepEqual(
          history.map((h) => [h.to_status, h.reason]),
          [
            ["draft", null],
            ["submitted", null],
            ["rejected", "Cover art is blurry"],
            [to, null],
          ],
        );
      });
    }

    test("a rolled-back submission leaves no history, job, event or submitted_at", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      await assert.rejects(
        db().withRequestContext(m.claims, async (tx) => {
          await tx.query("update public.releases set status = 'submitted' where id = $1", [release.id]);
          await tx.query("select 1/0");
        }),
        (e: unknown) => asDbError(e)?.sqlstate === "22012",
      );
      const after = await readRelease(db(), release.id);
      assert.equal(after?.status, "draft");
      assert.equal(after?.submitted_at, null);
      assert.deepEqual(
        (await historyOf(db(), release.id)).map((h) => h.to_status),
        ["draft"],
      );
      assert.deepEqual(await jobsOf(db(), "release.review", "release_id", release.id), []);
      assert.deepEqual(await eventsOf(db(), release.id), []);
    });
  });

  describe("ownership", () => {
    for (const table of [ARTIST_PROFILES, ...CHILD_TABLES]) {
      test(`${table.table}: created_by is the member; naming another user is refused`, async () => {
        const m = await seedMember(db());
        const row = await insertCatalogRow(db(), m, m.claims, table);
        assert.equal(row.created_by, m.user.id);
        const colleague = await seedUser(db(), m.tenant, [{ account: m.account }]);
        const refused = await insertCatalogRow(db(), m, m.claims, table, { created_by: colleague.id }).catch(
          (e: unknown) => asDbError(e)?.sqlstate,
        );
        assert.equal(refused, "42501");
      });

      test(`${table.table}: a public-API key's rows have no created_by, and it cannot name one`, async () => {
        const m = await seedMember(db());
        const row = await insertCatalogRow(db(), m, keyClaims(m.account), table);
        assert.equal(row.created_by, null);
        const refused = await insertCatalogRow(db(), m, keyClaims(m.account), table, {
          created_by: m.user.id,
        }).catch((e: unknown) => asDbError(e)?.sqlstate);
        assert.equal(refused, "42501");
      });
    }

    /** The clients that create catalog rows in `m`'s account. */
    const CLIENTS: [name: string, claims: (m: Member) => Claims][] = [
      ["a member", (m) => m.claims],
      ["a public-API key", (m) => keyClaims(m.account)],
      ["a tenant's service key", (m) => tenantServiceClaims(m.tenant)],
    ];

    const DEFAULT_ACCOUNTS: {
      name: string;
      arrange: (db: Db, m: Member) => Promise<{ claims: Claims; account: Account }>;
    }[] = [
      {
        name: "the member's only account",
        arrange: async (_db, m) => ({ claims: m.claims, account: m.account }),
      },
      {
        name: "the member's default account",
        arrange: async (db, m) => {
          const second = await joinAccount(db, m);
          await setDefaultAccount(db, m, second);
          return { claims: m.claims, account: second };
        },
      },
      {
        name: "the first account the member joined with write access",
        arrange: async (db, m) => {
          const earlier = await joinAccount(db, m, "member", 2);
          return { claims: m.claims, account: earlier };
        },
      },
      {
        name: "a writable account, not an earlier one the member only views",
        arrange: async (db, m) => {
          await joinAccount(db, m, "viewer", 2);
          return { claims: m.claims, account: m.account };
        },
      },
      {
        name: "a public-API key's account",
        arrange: async (db, m) => {
          const account = await seedAccount(db, m.tenant, "Key Label");
          return { claims: keyClaims(account), account };
        },
      },
    ];
    for (const { name, arrange } of DEFAULT_ACCOUNTS) {
      test(`artist_profiles: account_id defaults to ${name}`, async () => {
        const m = await seedMember(db());
        const { claims, account } = await arrange(db(), m);
        const artist = await insertRow(db(), claims, "artist_profiles", { name: "Night Owl" });
        assert.equal(artist.account_id, account.id);
      });
    }

    test("artist_profiles: a member who only views has no account to default to -> 23502, not 42501", async () => {
      const tenant = await seedTenant(db());
      const viewer = await seedUser(db(), tenant, [
        { account: await seedAccount(db(), tenant), role: "viewer" },
      ]);
      const insert = insertSql("artist_profiles", { name: "Night Owl" });
      assert.deepEqual(await failureOf(() => query(db(), userClaims(viewer), ...insert)), {
        sqlstate: "23502",
        column: "account_id",
      });
    });

    for (const child of CHILD_TABLES) {
      const { noun, column, create } = child.parent;

      for (const [caller, claimsOf] of CLIENTS) {
        test(`${child.table}: without ${column} -> 23502, not 42501, as ${caller}`, async () => {
          const m = await seedMember(db());
          const insert = insertSql(child.table, child.values);
          assert.deepEqual(await failureOf(() => query(db(), claimsOf(m), ...insert)), {
            sqlstate: "23502",
            column,
          });
        });
      }

      test(`${child.table}: account_id defaults to the ${noun}'s account`, async () => {
        const m = await seedMember(db());
        const second = await joinAccount(db(), m);
        const parentId = await create(db(), m.claims, second.id);
        const row = await insertRow(db(), m.claims, child.table, { ...child.values, [column]: parentId });
        assert.equal(row.account_id, second.id);
      });

      for (const where of ["another account of the tenant", "another tenant"]) {
        test(`${child.table}: a ${noun} of ${where} is not found (23503)`, async () => {
          const m = await seedMember(db());
          const outsider = await seedMember(db(), where === "another tenant" ? undefined : m.tenant);
          const parentId = await create(db(), outsider.claims, outsider.account.id);
          const insert = insertSql(child.table, { ...child.values, [column]: parentId });
          assert.equal(await attempt(db(), m.claims, ...insert), "23503");
        });
      }

      test(`${child.table}: an account_id other than the ${noun}'s -> 23503`, async () => {
        const m = await seedMember(db());
        const second = await joinAccount(db(), m);
        const parentId = await create(db(), m.claims, m.account.id);
        const insert = insertSql(child.table, { ...child.values, [column]: parentId, account_id: second.id });
        assert.equal(await attempt(db(), m.claims, ...insert), "23503");
      });
    }

    test("releases: artist_name defaults to the artist's name and keeps one given", async () => {
      const m = await seedMember(db());
      const artistId = await createArtist(db(), m.claims);
      const named = { artist_id: artistId, title: "First Light" };
      const plain = await insertRow<ReleaseRow>(db(), m.claims, "releases", named);
      const credited = await insertRow<ReleaseRow>(db(), m.claims, "releases", {
        ...named,
        artist_name: "Night Owl feat. Lark",
      });
      assert.equal(plain.artist_name, "Night Owl");
      assert.equal(credited.artist_name, "Night Owl feat. Lark");
    });
  });

  describe("tracks", () => {
    /** A member, one of their draft releases and a track on it. */
    async function seedTrack(isrc?: string) {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      const track = await insertRow<{ isrc: string | null }>(db(), m.claims, "tracks", {
        release_id: release.id,
        title: "Intro",
        ...(isrc ? { isrc } : {}),
      });
      return { m, release, track };
    }

    for (const status of STATUSES) {
      const expected = EDITABLE.includes(status) ? "ok" : "BL001";
      test(`tracks of a ${status} release: insert, update and delete -> ${expected}`, async () => {
        const { m, release, track } = await seedTrack();
        await forceReleaseStatus(db(), release.id, status);
        const onTrack = (text: string) => attempt(db(), m.claims, text, [track.id]);
        const newTrack = insertSql("tracks", { release_id: release.id, title: "Outro" });
        const outcomes = {
          insert: await attempt(db(), m.claims, ...newTrack),
          update: await onTrack("update public.tracks set title = 'Prelude' where id = $1"),
          delete: await onTrack("delete from public.tracks where id = $1"),
        };
        assert.deepEqual(outcomes, { insert: expected, update: expected, delete: expected });
      });
    }

    for (const [input, stored] of [
      ["us-abc-24-00001", "USABC2400001"],
      ["USABC2400001", "USABC2400001"],
      [" gb-a1b-99-12345 ", "GBA1B9912345"],
    ]) {
      test(`an ISRC given as '${input}' is stored as ${stored}, on insert and on update`, async () => {
        const { m, track } = await seedTrack(input);
        assert.equal(track.isrc, stored);
        const [updated] = await query<{ isrc: string }>(
          db(),
          m.claims,
          "update public.tracks set isrc = $2 where id = $1 returning isrc",
          [track.id, input],
        );
        assert.equal(updated?.isrc, stored);
      });
    }

    for (const isrc of [
      "US-ABC-24-0001",
      "USABC24000012",
      "U1ABC2400001",
      "US_ABC_24_00001",
      "USABC24ABCDE",
      "",
    ]) {
      test(`a malformed ISRC '${isrc}' -> 23514`, async () => {
        const { m, release } = await seedTrack();
        const insert = insertSql("tracks", { release_id: release.id, title: "Outro", isrc });
        assert.equal(await attempt(db(), m.claims, ...insert), "23514");
      });
    }

    test("the same ISRC twice on one release -> 23505, however it is written", async () => {
      const { m, release } = await seedTrack("USABC2400001");
      const insert = insertSql("tracks", { release_id: release.id, title: "Intro", isrc: "us-abc-24-00001" });
      assert.equal(await attempt(db(), m.claims, ...insert), "23505");
    });

    test("the same recording (ISRC, title, version) on two releases is allowed", async () => {
      const { m } = await seedTrack("USABC2400001");
      const other = await seedRelease(db(), m.claims);
      const insert = insertSql("tracks", { release_id: other.id, title: "intro", isrc: "USABC2400001" });
      assert.equal(await attempt(db(), m.claims, ...insert), "ok");
    });

    test("an ISRC names one recording per account: another title or version with it -> BL006", async () => {
      const { m, track } = await seedTrack("USABC2400001");
      const other = await seedRelease(db(), m.claims);
      const cases = {
        otherTitle: await attempt(
          db(),
          m.claims,
          ...insertSql("tracks", { release_id: other.id, title: "Outro", isrc: "USABC2400001" }),
        ),
        otherVersion: await attempt(
          db(),
          m.claims,
          ...insertSql("tracks", {
            release_id: other.id,
            title: "Intro",
            version: "Remix",
            isrc: "USABC2400001",
          }),
        ),
      };
      assert.deepEqual(cases, { otherTitle: "BL006", otherVersion: "BL006" });
      // Another account may use the code: ISRCs are checked within an account.
      const stranger = await seedMember(db());
      const theirs = await seedRelease(db(), stranger.claims);
      const elsewhere = insertSql("tracks", { release_id: theirs.id, title: "Outro", isrc: "USABC2400001" });
      assert.equal(await attempt(db(), stranger.claims, ...elsewhere), "ok");
      assert.ok(track);
    });

    test("two tracks swap numbers in one UPDATE (the position constraint is checked per statement)", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims);
      for (const [title, track_number] of [
        ["Intro", 1],
        ["Outro", 2],
      ] as const) {
        await insertRow(db(), m.claims, "tracks", { release_id: release.id, title, track_number });
      }
      const swap = "update public.tracks set track_number = 3 - track_number where release_id = $1";
      assert.equal(await attempt(db(), m.claims, swap, [release.id]), "ok");
      const order = await query<{ title: string }>(
        db(),
        m.claims,
        "select title from public.tracks where release_id = $1 order by track_number",
        [release.id],
      );
      assert.deepEqual(
        order.map((r) => r.title),
        ["Outro", "Intro"],
      );
    });
  });

  describe("takedown requests", () => {
    function requestTakedown(claims: Claims, releaseId: string, values: Row = {}): Promise<string> {
      return attempt(db(), claims, ...insertSql("takedown_requests", { release_id: releaseId, ...values }));
    }

    for (const status of STATUSES) {
      const expected = TAKEDOWN_ALLOWED.includes(status) ? "ok" : "BL003";
      test(`a takedown request for a ${status} release -> ${expected}`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims, status);
        assert.equal(await requestTakedown(m.claims, release.id), expected);
      });
    }

    for (const status of ["processing", "completed", "rejected", "cancelled"]) {
      test(`a member cannot create a takedown request as ${status} (BL004)`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims, "live");
        assert.equal(await requestTakedown(m.claims, release.id, { status }), "BL004");
      });
    }

    for (const status of TAKEDOWN_ALLOWED) {
      test(`a takedown request moves a ${status} release to takedown_requested and queues takedown.process, in one transaction`, async () => {
        const m = await seedMember(db());
        const release = await seedRelease(db(), m.claims, status);
        const { takedown, seen } = await db().withRequestContext(m.claims, async (tx) => {
          const inserted = await tx.query<{ id: string }>(
            "insert into public.takedown_requests (release_id, reason) values ($1, 'Rights dispute') returning id",
            [release.id],
          );
          const current = await tx.query<{ status: string }>(
            "select status from public.releases where id = $1",
            [release.id],
          );
          return { takedown: inserted.rows[0], seen: current.rows[0]?.status };
        });
        assert.ok(takedown);
        assert.equal(seen, "takedown_requested");
        assert.equal((await readRelease(db(), release.id))?.status_reason, "Rights dispute");
        assert.deepEqual(await jobsOf(db(), "takedown.process", "takedown_request_id", takedown.id), [
          { kind: "takedown.process", payload: { takedown_request_id: takedown.id }, status: "queued" },
        ]);
      });
    }

    test("a rolled-back takedown request leaves the release live and queues nothing", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims, "live");
      let takedownId: string | undefined;
      await assert.rejects(
        db().withRequestContext(m.claims, async (tx) => {
          const inserted = await tx.query<{ id: string }>(
            "insert into public.takedown_requests (release_id) values ($1) returning id",
            [release.id],
          );
          takedownId = inserted.rows[0]?.id;
          await tx.query("select 1/0");
        }),
        (e: unknown) => asDbError(e)?.sqlstate === "22012",
      );
      assert.ok(takedownId);
      assert.equal((await readRelease(db(), release.id))?.status, "live");
      assert.deepEqual(await jobsOf(db(), "takedown.process", "takedown_request_id", takedownId), []);
      assert.deepEqual(
        await query(db(), serviceClaims, "select id from public.takedown_requests where id = $1", [
          takedownId,
        ]),
        [],
      );
    });

    test("a second open takedown request for the same release -> 23505", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims, "live");
      assert.equal(await requestTakedown(m.claims, release.id), "ok");
      assert.equal(await requestTakedown(m.claims, release.id), "23505");
    });

    test("two takedown requests for one release in one statement -> 23505", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims, "live");
      const twice = "insert into public.takedown_requests (release_id) values ($1), ($1)";
      assert.equal(await attempt(db(), m.claims, twice, [release.id]), "23505");
    });

    test("members cannot change a takedown request's status (42501)", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims, "live");
      const takedown = await insertRow(db(), m.claims, "takedown_requests", { release_id: release.id });
      const cancel = "update public.takedown_requests set status = 'cancelled' where id = $1";
      assert.equal(await attempt(db(), m.claims, cancel, [takedown.id]), "42501");
    });

    test("the service role moves a takedown pending -> processing -> completed, setting completed_at", async () => {
      const m = await seedMember(db());
      const release = await seedRelease(db(), m.claims, "live");
      const takedown = await insertRow(db(), m.claims, "takedown_requests", { release_id: release.id });
      assert.equal(takedown.status, "pending");
      const moveTo = async (status: string) => {
        const [row] = await query<{ status: string; completed_at: Date | null }>(
          db(),
          serviceClaims,
          "update public.takedown_requests set status = $2 where id = $1 returning status, completed_at",
          [takedown.id, status],
        );
        return row;
      };
      assert.deepEqual(await moveTo("processing"), { status: "processing", completed_at: null });
      const completed = await moveTo("completed");
      assert.equal(completed?.status, "completed");
      assert.ok(completed?.completed_at instanceof Date, "completed_at is set");
    });
  });

  describe("a tenant's service key (tenant_service)", () => {
    /** A member of a fresh tenant, and the claims of that tenant's service-role key. */
    async function seedTenantService(): Promise<{ m: Member; claims: Claims }> {
      const m = await seedMember(db());
      return { m, claims: tenantServiceClaims(m.tenant) };
    }

    test("creates a release as draft and submits it; the history names tenant_service and no user", async () => {
      const { m, claims } = await seedTenantService();
      const release = await seedRelease(db(), claims, "draft", m.account.id);
      assert.equal(release.account_id, m.account.id);
      assert.equal(release.created_by, null);
      const submitted = await setStatus(db(), claims, release.id, "submitted");
      assert.ok(submitted.submitted_at instanceof Date, "submitted_at is set");
      const who = { actor_role: "tenant_service", actor_user_id: null, actor_api_key_id: null };
      assert.deepEqual(await historyOf(db(), release.id), [
        { from_status: null, to_status: "draft", reason: null, ...who },
        { from_status: "draft", to_status: "submitted", reason: null, ...who },
      ]);
      assert.deepEqual(await jobsOf(db(), "release.review", "release_id", release.id), [
        { kind: "release.review", payload: { release_id: release.id }, status: "queued" },
      ]);
    });

    for (const status of STATUSES) {
      const expected = status === "draft" || status === "pending" ? "ok" : "BL002";
      test(`creates a release as ${status}: ${expected}`, async () => {
        const { m, claims } = await seedTenantService();
        const artistId = await createArtist(db(), claims, m.account.id);
        const create = insertSql("releases", { artist_id: artistId, title: "First Light", status });
        assert.equal(await attempt(db(), claims, ...create), expected);
      });
    }

    for (const to of OPERATOR_TARGETS) {
      test(`moves a draft release to ${to}: BL002`, async () => {
        const { m, claims } = await seedTenantService();
        const release = await seedRelease(db(), m.claims);
        const move = "update public.releases set status = $2 where id = $1";
        assert.equal(await attempt(db(), claims, move, [release.id, to]), "BL002");
        assert.equal((await readRelease(db(), release.id))?.status, "draft");
      });
    }

    for (const status of LOCKED) {
      const deletion = NEVER_DELIVERED.includes(status) ? "ok" : "BL001";
      test(`a ${status} release is closed to it: update and status change -> BL001, delete -> ${deletion}`, async () => {
        const { m, claims } = await seedTenantService();
        const release = await seedRelease(db(), m.claims, status);
        const onRelease = (text: string) => attempt(db(), claims, text, [release.id]);
        const outcomes = {
          title: await onRelease("update public.releases set title = 'Renamed' where id = $1"),
          status: await onRelease("update public.releases set status = 'draft' where id = $1"),
          delete: await onRelease("delete from public.releases where id = $1"),
        };
        assert.deepEqual(outcomes, { title: "BL001", status: "BL001", delete: deletion });
      });
    }

    test("the tracks of a live release are closed to it (BL001); moving one off is not granted (42501)", async () => {
      const { m, claims } = await seedTenantService();
      const live = await seedRelease(db(), m.claims);
      const track = await insertRow(db(), m.claims, "tracks", { release_id: live.id, title: "Intro" });
      await forceReleaseStatus(db(), live.id, "live");
      const draft = await seedRelease(db(), m.claims);
      const onTrack = (text: string, ...params: unknown[]) =>
        attempt(db(), claims, text, [track.id, ...params]);
      const outcomes = {
        insert: await attempt(db(), claims, ...insertSql("tracks", { release_id: live.id, title: "Outro" })),
        update: await onTrack("update public.tracks set title = 'Prelude' where id = $1"),
        delete: await onTrack("delete from public.tracks where id = $1"),
        moveOff: await onTrack("update public.tracks set release_id = $2 where id = $1", draft.id),
      };
      assert.deepEqual(outcomes, { insert: "BL001", update: "BL001", delete: "BL001", moveOff: "42501" });
    });

    /**
     * Runs `text` as `claims` in a transaction of the schema owner's that first makes `grant` and is
     * then rolled back: how a test reaches a trigger's check that no client's grants reach today.
     */
    async function attemptWithGrant(
      grant: string,
      claims: Claims,
      text: string,
      params: unknown[],
    ): Promise<string> {
      const rollBack = new Error("rolled back on purpose");
      let affected = 0;
      try {
        await t().owner.transaction(
          async (tx) => {
            await tx.query(grant);
            await tx.query(
              "select set_config('role', $1, true), set_config('request.jwt.claims', $2, true)",
              [claims.role, JSON.stringify(claims)],
            );
            affected = (await tx.query(text, params)).rowCount;
            throw rollBack;
          },
          { readOnly: false },
        );
      } catch (error) {
        if (error === rollBack) return affected > 0 ? "ok" : "no rows";
        const sqlstate = asDbError(error)?.sqlstate;
        if (!sqlstate) throw error;
        return sqlstate;
      }
      throw new Error("the transaction was not rolled back");
    }

    /**
     * No client may update release_id (moveOff above), but should one ever be granted, track_rules
     * still guards both releases: the one a track leaves and the one it goes to.
     */
    const TRACK_MOVES: [from: Status, to: Status, expected: string][] = [
      ["draft", "pending", "ok"],
      ["draft", "live", "BL001"],
      ["live", "draft", "BL001"],
    ];
    for (const [from, to, expected] of TRACK_MOVES) {
      test(`track_rules, were release_id granted: moving a track from a ${from} release to a ${to} one -> ${expected}`, async () => {
        const { m, claims } = await seedTenantService();
        const source = await seedRelease(db(), m.claims);
        const track = await insertRow(db(), m.claims, "tracks", { release_id: source.id, title: "Intro" });
        await forceReleaseStatus(db(), source.id, from);
        const target = await seedRelease(db(), m.claims, to);
        const grant = "grant update (release_id) on public.tracks to tenant_service";
        const move = "update public.tracks set release_id = $2 where id = $1";
        assert.equal(await attemptWithGrant(grant, claims, move, [track.id, target.id]), expected);
      });
    }

    test("an artist without account_id -> 23502: a service key has no default account", async () => {
      const { claims } = await seedTenantService();
      const insert = insertSql("artist_profiles", { name: "Night Owl" });
      assert.deepEqual(await failureOf(() => query(db(), claims, ...insert)), {
        sqlstate: "23502",
        column: "account_id",
      });
    });

    for (const table of [ARTIST_PROFILES, ...CHILD_TABLES]) {
      /** A service key has no default account: an artist names its account, a child row takes its parent's. */
      const accountOf = (m: Member): Row =>
        table.table === "artist_profiles" ? { account_id: m.account.id } : {};

      test(`${table.table}: created_by is kept when it names a user of its tenant, and null when left out`, async () => {
        const { m, claims } = await seedTenantService();
        const named = await insertCatalogRow(db(), m, claims, table, {
          ...accountOf(m),
          created_by: m.user.id,
        });
        const unnamed = await insertCatalogRow(db(), m, claims, table, accountOf(m));
        assert.deepEqual(
          [named, unnamed].map((row) => [row.account_id, row.created_by]),
          [
            [m.account.id, m.user.id],
            [m.account.id, null],
          ],
        );
      });

      test(`${table.table}: created_by naming another tenant's user -> 23503`, async () => {
        const { m, claims } = await seedTenantService();
        const outsider = await seedMember(db());
        const named = { ...accountOf(m), created_by: outsider.user.id };
        assert.deepEqual(await failureOf(() => insertCatalogRow(db(), m, claims, table, named)), {
          sqlstate: "23503",
          column: "created_by",
        });
      });
    }

    for (const status of ["processing", "completed", "rejected", "cancelled"]) {
      test(`a takedown request created as ${status} -> BL004, moving one there is not granted (42501); the service role may move it`, async () => {
        const { m, claims } = await seedTenantService();
        const release = await seedRelease(db(), m.claims, "live");
        const create = insertSql("takedown_requests", { release_id: release.id, status });
        assert.equal(await attempt(db(), claims, ...create), "BL004");
        const takedown = await insertRow(db(), claims, "takedown_requests", { release_id: release.id });
        assert.equal(takedown.status, "pending");
        const move = "update public.takedown_requests set status = $2 where id = $1 returning status";
        assert.equal(await attempt(db(), claims, move, [takedown.id, status]), "42501");
        const [moved] = await query(db(), serviceClaims, move, [takedown.id, status]);
        assert.equal(moved?.status, status);
      });
    }

    test("notifies a user of its tenant; the notification's tenant_id is filled in", async () => {
      const { m, claims } = await seedTenantService();
      const notification = await insertRow(db(), claims, "notifications", {
        user_id: m.user.id,
        account_id: m.account.id,
        kind: "release.approved",
        title: "Your release was approved",
      });
      assert.equal(notification.tenant_id, m.tenant.id);
      const [seen] = await query(db(), m.claims, "select id from public.notifications where id = $1", [
        notification.id,
      ]);
      assert.equal(seen?.id, notification.id);
    });

    test("a notification for another tenant's user -> 42501", async () => {
      const { claims } = await seedTenantService();
      const outsider = await seedMember(db());
      const insert = insertSql("notifications", {
        user_id: outsider.user.id,
        kind: "release.approved",
        title: "Hi",
      });
      assert.equal(await attempt(db(), claims, ...insert), "42501");
    });
  });

  describe("column privileges", () => {
    /** A member with a second account, a colleague, and a draft release with a track and a notification. */
    async function seedScene() {
      const m = await seedMember(db());
      const second = await joinAccount(db(), m);
      const colleague = await seedUser(db(), m.tenant, [{ account: m.account }]);
      const release = await seedRelease(db(), m.claims);
      const track = await insertRow(db(), m.claims, "tracks", { release_id: release.id, title: "Intro" });
      const notification = await insertRow(db(), serviceClaims, "notifications", {
        user_id: m.user.id,
        account_id: m.account.id,
        kind: "release.approved",
        title: "Your release was approved",
      });
      return {
        m,
        second,
        colleague,
        rows: { releases: release.id, tracks: track.id, notifications: notification.id },
      };
    }
    type Scene = Awaited<ReturnType<typeof seedScene>>;

    const OPERATOR_COLUMNS: { table: keyof Scene["rows"]; column: string; value: (s: Scene) => unknown }[] = [
      { table: "releases", column: "status_reason", value: () => "Approved by staff" },
      { table: "releases", column: "account_id", value: (s) => s.second.id },
      { table: "releases", column: "created_by", value: (s) => s.colleague.id },
      { table: "tracks", column: "account_id", value: (s) => s.second.id },
      { table: "notifications", column: "user_id", value: (s) => s.colleague.id },
    ];
    for (const { table, column, value } of OPERATOR_COLUMNS) {
      test(`a member cannot update ${table}.${column} (42501)`, async () => {
        const s = await seedScene();
        const update = `update public.${table} set ${column} = $2 where id = $1`;
        assert.equal(await attempt(db(), s.m.claims, update, [s.rows[table], value(s)]), "42501");
      });
    }

    test("marking a notification read sets read_at, and unread clears it", async () => {
      const s = await seedScene();
      const mark = async (read: boolean) => {
        const [row] = await query<{ read: boolean; read_at: Date | null }>(
          db(),
          s.m.claims,
          "update public.notifications set read = $2 where id = $1 returning read, read_at",
          [s.rows.notifications, read],
        );
        return row;
      };
      const read = await mark(true);
      assert.equal(read?.read, true);
      assert.ok(read?.read_at instanceof Date, "read_at is set");
      assert.deepEqual(await mark(false), { read: false, read_at: null });
    });
  });

  describe("checks", () => {
    const CHECKS: { column: string; value: string; expected: "ok" | "23514" }[] = [
      { column: "upc", value: "036000291452", expected: "ok" },
      { column: "upc", value: "4006381333931", expected: "ok" },
      { column: "upc", value: "036000291453", expected: "23514" },
      { column: "upc", value: "36000291452", expected: "23514" },
      { column: "upc", value: "03600029145X", expected: "23514" },
      { column: "upc", value: "not-a-barcode", expected: "23514" },
      { column: "licensed_territories_include", value: "WW", expected: "ok" },
      { column: "licensed_territories_include", value: "US,CA", expected: "ok" },
      { column: "licensed_territories_include", value: "usa", expected: "23514" },
      { column: "licensed_territories_include", value: "US, CA", expected: "23514" },
      { column: "release_type", value: "album", expected: "ok" },
      { column: "release_type", value: "podcast", expected: "23514" },
    ];
    for (const { column, value, expected } of CHECKS) {
      test(`releases.${column} = '${value}': ${expected}`, async () => {
        const m = await seedMember(db());
        const artistId = await createArtist(db(), m.claims);
        const insert = insertSql("releases", { artist_id: artistId, title: "First Light", [column]: value });
        assert.equal(await attempt(db(), m.claims, ...insert), expected);
      });
    }
  });
});
