import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  type ApiResponse,
  completeRelease,
  expectStatus,
  isrcs,
  issueTestKey,
  publicApi,
} from "./support/public-api.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { type SeedUser, seedAccount, seedStaffUser, seedUser, userToken } from "./support/seed.ts";

/**
 * Add-ons (migration 0051; docs/operator.md "Add-ons", docs/public-api.md "Add-ons") over real
 * HTTP: a tenant's admin defines the extras it sells through /admin/v1 (bad ones refused with the
 * field at fault, nothing written); a member lists them and buys one for a release through the
 * public API (idempotent), which posts the charge to the ledger as a recoupable expense, recouped
 * from the release's earnings before its payees are paid, and shows on the account's statement
 * (JSON and CSV); a store an add-on unlocks is delivered to only with it; priority review puts
 * the release first in the review queue; a viewer, another account and another tenant cannot
 * see or buy.
 */

type Obj = Record<string, unknown>;
type Order = Obj & { id: string; price: string; active: boolean; expires_at: string | null };
type Problem = { code: string; param?: string; errors?: { param: string; code: string }[] };

const nextIsrc = isrcs("QZADD");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const month = () => new Date().toISOString().slice(0, 7);

describeEachEngine("add-ons", (t) => {
  let app: RunningApp;
  const db = (): Db => t().db;
  const sql = async <T = Obj>(text: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Obj>(text, params)).rows as T[]);

  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  /** /admin/v1 with a tenant's service-role key, or a staff user's token beside the anon key. */
  const admin = async <T = Obj>(
    auth: { key: string } | { token: string; anon: string },
    method: string,
    path: string,
    body?: unknown,
  ) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: {
        ...("key" in auth
          ? { apikey: auth.key }
          : { authorization: `Bearer ${auth.token}`, apikey: auth.anon }),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  };

  interface World {
    tenant: Tenant;
    keys: TenantKeys;
    a: Account;
    b: Account;
    users: Record<"owner" | "member" | "viewer" | "ownerB", SeedUser>;
    tokens: Record<"owner" | "member" | "viewer" | "ownerB", string>;
    svc: { key: string };
  }

  async function world(settings: Obj = {}): Promise<World> {
    const { tenant, keys } = await tenantWithKeys(t(), { settings });
    const a = await seedAccount(db(), tenant, "Label A");
    const b = await seedAccount(db(), tenant, "Label B");
    const users = {
      owner: await seedUser(db(), tenant, [{ account: a, role: "owner" }]),
      member: await seedUser(db(), tenant, [{ account: a, role: "member" }]),
      viewer: await seedUser(db(), tenant, [{ account: a, role: "viewer" }]),
      ownerB: await seedUser(db(), tenant, [{ account: b, role: "owner" }]),
    };
    const issuer = `${app.url}/auth/v1`;
    const tokens = {
      owner: await userToken(db(), tenant, users.owner, issuer),
      member: await userToken(db(), tenant, users.member, issuer),
      viewer: await userToken(db(), tenant, users.viewer, issuer),
      ownerB: await userToken(db(), tenant, users.ownerB, issuer),
    };
    return { tenant, keys, a, b, users, tokens, svc: { key: keys.service_role_key } };
  }

  /** The public API as a signed-in member acting for `account`. */
  const as =
    (token: string, account: Account) =>
    <T = Obj>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>> =>
      publicApi(app.url, token)<T>(method, path, body, { "backline-account": account.id });

  const CONTENT_ID = {
    code: "youtube_content_id",
    name: "YouTube Content ID",
    description: "Your release registered with Content ID; staff handle the claims.",
    price: "4.99",
    billing: "per_year",
    effect: "informational",
  };
  const PRIORITY = {
    code: "priority_review",
    name: "Priority review",
    price: "19",
    billing: "per_release",
    effect: "priority_review",
  };
  const APPLE = {
    code: "apple_music",
    name: "Apple Music delivery",
    price: "2.50",
    billing: "per_release",
    effect: "unlock_store",
    store_codes: ["apple_music"],
  };

  async function define(w: World, addOn: Obj) {
    const r = await admin<Obj>(w.svc, "POST", "/add-ons", addOn);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  }

  async function draftRelease(w: World, account: Account, title = "Night Drive"): Promise<string> {
    const [artist] = await sql<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Luna') returning id",
      [account.id],
    );
    const [release] = await sql<{ id: string }>(
      "insert into public.releases (account_id, artist_id, title) values ($1, $2, $3) returning id",
      [account.id, artist?.id, title],
    );
    void w;
    return release?.id as string;
  }

  const ledgerOf = (accountId: string) =>
    sql<{ txn_kind: string; holder: string; amount: string; release_id: string | null }>(
      `select txn_kind, holder, trim_scale(amount)::text as amount, release_id from internal.ledger_entries
       where account_id = $1 and txn_kind = 'add_on' order by id`,
      [accountId],
    );

  test("a tenant admin defines add-ons; a bad one is refused with each failing field and nothing is written; staff below admin only read; another tenant sees none", async () => {
    const w = await world();
    const made = await define(w, CONTENT_ID);
    assert.deepEqual(
      { ...made, created_at: undefined, updated_at: undefined },
      {
        code: "youtube_content_id",
        object: "add_on",
        name: "YouTube Content ID",
        description: CONTENT_ID.description,
        price: "4.99",
        currency: "USD",
        billing: "per_year",
        effect: "informational",
        store_codes: [],
        enabled: true,
        orders: 0,
        created_at: undefined,
        updated_at: undefined,
      },
    );
    const [audited] = await sql<{ action: string; actor_type: string; after: Obj }>(
      `select action, actor_type, after from internal.audit_log
       where tenant_id = $1 and object_table = 'internal.add_on_settings' order by id`,
      [w.tenant.id],
    );
    assert.equal(audited?.action, "insert", "the catalogue's changes are audited");
    assert.equal(audited?.after.add_on, "youtube_content_id");
    assert.equal((await define(w, PRIORITY)).price, "19.00", "stated in the currency's minor units");
    assert.deepEqual((await define(w, APPLE)).store_codes, ["apple_music"]);
    assert.equal(
      (await define(w, { ...CONTENT_ID, code: "jp_lyrics", currency: "JPY", price: "500" })).price,
      "500",
    );

    const dup = await admin<Problem>(w.svc, "POST", "/add-ons", CONTENT_ID);
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, "add_on_exists");
    assert.equal(dup.body.param, "code");

    // Sellable? Each failing field listed at once.
    const bad = await admin<Problem>(w.svc, "POST", "/add-ons", {
      ...CONTENT_ID,
      code: "bad",
      price: "1.999",
      store_codes: ["apple_music"],
    });
    assert.equal(bad.status, 422, JSON.stringify(bad.body));
    assert.equal(bad.body.code, "invalid_add_on");
    assert.deepEqual(
      bad.body.errors?.map((e) => [e.param, e.code]),
      [
        ["price", "amount_precision"],
        ["store_codes", "invalid_value"],
      ],
    );
    const yen = await admin<Problem>(w.svc, "POST", "/add-ons", {
      ...CONTENT_ID,
      code: "yen",
      currency: "JPY",
      price: "500.5",
    });
    assert.equal(yen.status, 422);
    assert.deepEqual(
      yen.body.errors?.map((e) => [e.param, e.code]),
      [["price", "amount_precision"]],
    );
    const noStore = await admin<Problem>(w.svc, "POST", "/add-ons", {
      ...APPLE,
      code: "nostore",
      store_codes: ["no_such_store"],
    });
    assert.equal(noStore.status, 422);
    assert.deepEqual(
      noStore.body.errors?.map((e) => [e.param, e.code]),
      [["store_codes", "unknown_store"]],
    );
    const noStores = await admin<Problem>(w.svc, "POST", "/add-ons", {
      ...APPLE,
      code: "nostores",
      store_codes: [],
    });
    assert.equal(noStores.status, 422);
    assert.deepEqual(
      noStores.body.errors?.map((e) => [e.param, e.code]),
      [["store_codes", "required"]],
    );
    // Not even the shape: the admin API's 400 invalid_request, every field named.
    const shapeless = await admin<Problem>(w.svc, "POST", "/add-ons", {
      code: "Bad Code",
      price: -1,
      billing: "monthly",
      effect: "informational",
    });
    assert.equal(shapeless.status, 400);
    assert.equal(shapeless.body.code, "invalid_request");
    assert.deepEqual(shapeless.body.errors?.map((e) => e.param).sort(), ["billing", "code", "name", "price"]);

    const list = await admin<{ data: Obj[] }>(w.svc, "GET", "/add-ons");
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((x) => x.code).sort(), [
      "apple_music",
      "jp_lyrics",
      "priority_review",
      "youtube_content_id",
    ]);

    // A change, and its refusal changing nothing.
    const changed = await admin<Obj>(w.svc, "PATCH", "/add-ons/youtube_content_id", {
      price: "5.99",
      sort: -1,
    });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    assert.equal(changed.body.price, "5.99");
    const refused = await admin<Problem>(w.svc, "PATCH", "/add-ons/youtube_content_id", { currency: "JPY" });
    assert.equal(refused.status, 422, "5.99 has decimals JPY has not");
    assert.equal(refused.body.errors?.[0]?.param, "price");
    assert.equal((await admin<Obj>(w.svc, "GET", "/add-ons/youtube_content_id")).body.currency, "USD");
    assert.equal((await admin<Problem>(w.svc, "PATCH", "/add-ons/nothing", { price: "1" })).status, 404);

    // A reviewer reads, never writes.
    const reviewer = await seedStaffUser(db(), w.tenant, [{ of: w.tenant, role: "reviewer" }]);
    const staff = {
      token: await userToken(db(), w.tenant, reviewer, `${app.url}/auth/v1`),
      anon: w.keys.anon_key,
    };
    assert.equal((await admin(staff, "GET", "/add-ons")).status, 200);
    assert.equal(
      (await admin(staff, "POST", "/add-ons", { ...CONTENT_ID, code: "by_reviewer" })).status,
      403,
    );
    assert.equal(
      (await admin(staff, "PATCH", "/add-ons/youtube_content_id", { enabled: false })).status,
      403,
    );

    // Another tenant's admin: none of these.
    const other = await world();
    assert.deepEqual((await admin<{ data: Obj[] }>(other.svc, "GET", "/add-ons")).body.data, []);
    assert.equal((await admin(other.svc, "GET", "/add-ons/youtube_content_id")).status, 404);
    assert.equal(
      (await admin(other.svc, "PATCH", "/add-ons/youtube_content_id", { price: "0" })).status,
      404,
    );
  });

  test("a member buys an add-on for a release: the order keeps the price, a second purchase is the same order, the ledger has one charge, the event is written", async () => {
    const w = await world();
    await define(w, CONTENT_ID);
    await define(w, PRIORITY);
    await define(w, { ...CONTENT_ID, code: "lyrics", name: "Lyrics delivery", enabled: false });
    const release = await draftRelease(w, w.a);
    const owner = as(w.tokens.owner, w.a);

    const onSale = expectStatus(await owner<{ data: Obj[] }>("GET", "/add-ons"), 200);
    assert.deepEqual(
      onSale.data.map((x) => x.code),
      ["priority_review", "youtube_content_id"],
      "not the one off sale",
    );
    assert.equal(onSale.data[1]?.price, "4.99");
    assert.equal(onSale.data[1]?.enabled, undefined, "members are not told about what is off sale");

    const bought = expectStatus(
      await owner<Order>("POST", `/releases/${release}/add-ons`, { add_on: "youtube_content_id" }),
      200,
    );
    assert.equal(bought.object, "add_on_order");
    assert.equal(bought.price, "4.99");
    assert.equal(bought.currency, "USD");
    assert.equal(bought.active, true);
    assert.equal(bought.billing, "per_year");
    const yearOut = Date.parse(bought.expires_at ?? "") - Date.parse(String(bought.created_at));
    assert.ok(Math.abs(yearOut - 365 * 86_400_000) <= 86_400_000, `a year: ${bought.expires_at}`);

    // The admin raises the price: what was bought keeps its price; buying again is the same order.
    await admin(w.svc, "PATCH", "/add-ons/youtube_content_id", { price: "9.99" });
    const again = expectStatus(
      await owner<Order>("POST", `/releases/${release}/add-ons`, { add_on: "youtube_content_id" }),
      200,
    );
    assert.equal(again.id, bought.id);
    assert.equal(again.price, "4.99");
    // A member of the account (not only its owner) may buy too; the price now is the new one.
    const member = as(w.tokens.member, w.a);
    const second = await draftRelease(w, w.a, "Daybreak");
    assert.equal(
      expectStatus(
        await member<Order>("POST", `/releases/${second}/add-ons`, { add_on: "youtube_content_id" }),
        200,
      ).price,
      "9.99",
    );

    const listed = expectStatus(await owner<{ data: Order[] }>("GET", `/releases/${release}/add-ons`), 200);
    assert.deepEqual(
      listed.data.map((o) => [o.id, o.add_on, o.price]),
      [[bought.id, "youtube_content_id", "4.99"]],
    );

    assert.deepEqual(
      (await ledgerOf(w.a.id)).map((e) => [e.txn_kind, e.holder, e.amount, e.release_id]),
      [
        ["add_on", "recoupable", "-4.99", release],
        ["add_on", "fees", "4.99", release],
        ["add_on", "recoupable", "-9.99", second],
        ["add_on", "fees", "9.99", second],
      ],
    );
    const [expense] = await sql<{ kind: string; amount: string; description: string }>(
      "select kind, amount::text, description from internal.recoupables where release_id = $1",
      [release],
    );
    assert.deepEqual(expense, {
      kind: "expense",
      amount: "4.99",
      description: "Add-on: YouTube Content ID — Night Drive",
    });
    const events = await sql<{ type: string; data: { object: Obj } }>(
      "select type, data from internal.events where account_id = $1 and type = 'add_on.purchased' order by created_at, id",
      [w.a.id],
    );
    assert.equal(events.length, 2, "one per purchase, none for the repeat");
    assert.equal(events[0]?.data.object.id, bought.id);
    assert.equal(events[0]?.data.object.price, "4.99");

    // Staff see who bought it, to fulfil it.
    const orders = await admin<{ data: Obj[] }>(w.svc, "GET", "/add-ons/youtube_content_id/orders");
    assert.deepEqual(
      orders.body.data.map((o) => [o.release_title, o.account_name, o.price]),
      [
        ["Daybreak", "Label A", "9.99"],
        ["Night Drive", "Label A", "4.99"],
      ],
    );
  });

  test("a per_year add-on runs out after its year: the release no longer has it, and buying again is a new order and a new charge", async () => {
    const w = await world();
    await define(w, CONTENT_ID);
    const release = await draftRelease(w, w.a);
    const owner = as(w.tokens.owner, w.a);
    const first = expectStatus(
      await owner<Order>("POST", `/releases/${release}/add-ons`, { add_on: "youtube_content_id" }),
      200,
    );
    await sql("update internal.add_on_orders set expires_at = now() - interval '1 second' where id = $1", [
      first.id,
    ]);
    const listed = expectStatus(await owner<{ data: Order[] }>("GET", `/releases/${release}/add-ons`), 200);
    assert.deepEqual(
      listed.data.map((o) => [o.id, o.active]),
      [[first.id, false]],
    );
    const renewed = expectStatus(
      await owner<Order>("POST", `/releases/${release}/add-ons`, { add_on: "youtube_content_id" }),
      200,
    );
    assert.notEqual(renewed.id, first.id);
    assert.equal(renewed.active, true);
    assert.deepEqual(
      (await ledgerOf(w.a.id)).map((e) => e.amount),
      ["-4.99", "4.99", "-4.99", "4.99"],
    );
  });

  test("who may buy: not a viewer, not a key without catalog:write, not another account or tenant; nothing is charged when refused", async () => {
    const w = await world();
    await define(w, CONTENT_ID);
    await define(w, { ...PRIORITY, enabled: false });
    const release = await draftRelease(w, w.a);
    const releaseB = await draftRelease(w, w.b);
    const buy = (call: ReturnType<typeof as>, id: string, code = "youtube_content_id") =>
      call<Problem>("POST", `/releases/${id}/add-ons`, { add_on: code });

    const viewer = as(w.tokens.viewer, w.a);
    assert.equal(
      expectStatus(await viewer<{ data: Obj[] }>("GET", "/add-ons"), 200).data.length,
      1,
      "a viewer sees what is on sale",
    );
    const refused = await buy(viewer, release);
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    const readKey = await issueTestKey(db(), w.a, { scopes: ["catalog:read"] });
    assert.equal((await buy(publicApi(app.url, readKey.secret), release)).status, 403);
    const viewerKey = await issueTestKey(db(), w.a, { scopes: ["catalog:read", "catalog:write"] });
    await sql("update internal.api_keys set account_role = 'viewer' where id = $1", [viewerKey.id]);
    assert.equal((await buy(publicApi(app.url, viewerKey.secret), release)).status, 403, "a viewer's key");

    // Another account of the tenant: A's release does not exist for it, and A's orders neither.
    const ownerB = as(w.tokens.ownerB, w.b);
    assert.equal((await buy(ownerB, release)).status, 404);
    assert.equal((await ownerB("GET", `/releases/${release}/add-ons`)).status, 404);
    // A's owner acting for A cannot buy for B's release either.
    const owner = as(w.tokens.owner, w.a);
    assert.equal((await buy(owner, releaseB)).status, 404);
    // Off sale, unknown: 422 on add_on.
    for (const code of ["priority_review", "nothing_like_it"]) {
      const r = await buy(owner, release, code);
      assert.equal(r.status, 422, code);
      assert.equal(r.body.param, "add_on");
    }

    // Another tenant: none of this tenant's add-ons, nor can its members buy them.
    const other = await world();
    await define(other, { ...CONTENT_ID, code: "their_own", name: "Theirs" });
    const otherOwner = as(other.tokens.owner, other.a);
    assert.deepEqual(
      expectStatus(await otherOwner<{ data: Obj[] }>("GET", "/add-ons"), 200).data.map((x) => x.code),
      ["their_own"],
    );
    const otherRelease = await draftRelease(other, other.a);
    assert.equal(
      (await buy(otherOwner, otherRelease)).status,
      422,
      "youtube_content_id is not on sale there",
    );
    assert.equal((await buy(otherOwner, release)).status, 404);
    assert.equal(
      (await as(w.tokens.owner, w.a)<{ data: Obj[] }>("GET", "/add-ons")).body.data.some(
        (x) => x.code === "their_own",
      ),
      false,
    );

    assert.deepEqual(await ledgerOf(w.a.id), []);
    assert.deepEqual(await ledgerOf(w.b.id), []);
    assert.deepEqual(
      await sql("select id from internal.add_on_orders where tenant_id = $1", [w.tenant.id]),
      [],
    );
    // The owner may: the same path works for them.
    assert.equal((await buy(owner, release)).status, 200);
  });

  test("the charge is recouped from the release's earnings before its payees are paid, and the account's statement shows it (JSON and CSV)", async () => {
    const w = await world();
    await define(w, CONTENT_ID);
    const isrc = nextIsrc();
    const seeded = await seedDeliveredRelease(db(), w.a.id, { title: "Night Drive", upc: "012345000010" }, [
      { title: "Night Drive", isrc, duration: 200, track_number: 1 },
    ]);
    const owner = as(w.tokens.owner, w.a);
    expectStatus(
      await owner("POST", `/releases/${seeded.id}/add-ons`, { add_on: "youtube_content_id" }),
      200,
    );

    const imported = await importRoyalties(db(), {
      tenantId: w.tenant.id,
      format: "backline",
      file: reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          `2026-11,2026-10,spotify,US,,${isrc},stream,100,0,0,12.50,USD`,
          "",
        ].join("\n"),
      ),
    });
    assert.equal(imported.status, "completed");
    const [payee] = await sql<{ amount: string; recouped: string }>(
      `select trim_scale(sum(amount))::text as amount, trim_scale(sum(recouped_amount))::text as recouped
       from internal.ledger_entries where account_id = $1 and holder = 'payee'`,
      [w.a.id],
    );
    assert.deepEqual(payee, { amount: "7.51", recouped: "4.99" }, "12.50 less the 4.99 add-on");

    const approved = await admin<{ statements: { id: string; account_id: string }[] }>(
      w.svc,
      "POST",
      `/money/periods/${month()}/approve`,
      {},
    );
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    const mine = approved.body.statements.find((s) => s.account_id === w.a.id);
    assert.ok(mine, "account A has a statement");
    const key = publicApi(app.url, (await issueTestKey(db(), w.a, { scopes: ["payouts:read"] })).secret);
    const doc = expectStatus(
      await key<{
        charges: Obj[];
        recoupables: Obj[];
        earnings: Obj[];
        closing_balance: string;
      }>("GET", `/statements/${mine.id}`),
      200,
    );
    assert.deepEqual(
      doc.charges.map((c) => [c.kind, c.add_on, c.name, c.release_title, c.currency, c.amount]),
      [["add_on", "youtube_content_id", "YouTube Content ID", "Night Drive", "USD", "4.99"]],
    );
    assert.deepEqual(
      doc.recoupables.map((c) => [c.kind, c.description, c.amount, c.unrecouped]),
      [["expense", "Add-on: YouTube Content ID — Night Drive", "4.99", "0.00"]],
    );
    assert.deepEqual(
      doc.earnings.map((e) => [e.earned, e.recouped, e.net]),
      [["12.50", "4.99", "7.51"]],
    );
    assert.equal(doc.closing_balance, "7.51");
    const csv = await fetch(`${app.url}/api/public/v1/statements/${mine.id}/csv`, {
      headers: {
        authorization: `Bearer ${(await issueTestKey(db(), w.a, { scopes: ["payouts:read"] })).secret}`,
      },
    });
    assert.equal(csv.status, 200);
    const lines = (await csv.text()).split("\r\n");
    const header = lines[0]?.split(",") ?? [];
    const charge = lines.find((l) => l.startsWith("charge,"))?.split(",") ?? [];
    const field = (name: string) => charge[header.indexOf(name)];
    assert.equal(field("release_title"), "Night Drive");
    assert.equal(field("fees"), "4.99");
    assert.equal(field("net"), "");
    assert.equal(field("description"), "Add-on: YouTube Content ID");
  });

  test("an account with no earnings still gets a statement for the period it bought an add-on in", async () => {
    const w = await world();
    await define(w, PRIORITY);
    const release = await draftRelease(w, w.b);
    expectStatus(
      await as(w.tokens.ownerB, w.b)("POST", `/releases/${release}/add-ons`, { add_on: "priority_review" }),
      200,
    );
    const approved = await admin<{
      statements: { id: string; account_id: string; closing_balance: string }[];
    }>(w.svc, "POST", `/money/periods/${month()}/approve`, {});
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.deepEqual(
      approved.body.statements.map((s) => [s.account_id, s.closing_balance]),
      [[w.b.id, "0.00"]],
    );
    const doc = await sql<{ document: { charges: Obj[]; recoupables: Obj[] } }>(
      "select document from internal.statements where id = $1",
      [approved.body.statements[0]?.id],
    );
    assert.equal(doc[0]?.document.charges[0]?.amount, "19.00");
    assert.equal(doc[0]?.document.recoupables[0]?.unrecouped, "19.00", "owed until earnings recoup it");
  });

  test("priority review puts the release first in the review queue, across pages", async () => {
    const w = await world();
    await define(w, PRIORITY);
    const key = publicApi(app.url, (await issueTestKey(db(), w.a)).secret);
    const submitted: string[] = [];
    for (const title of ["First", "Second", "Third"]) {
      const r = expectStatus(await key<{ id: string }>("POST", "/releases", completeRelease({ title })), 201);
      expectStatus(
        await key("POST", `/releases/${r.id}/tracks`, { title, isrc: nextIsrc(), duration: 200 }),
        201,
      );
      expectStatus(await key("POST", `/releases/${r.id}/submit`), 200);
      submitted.push(r.id);
      await sleep(5);
    }
    const [first, second, third] = submitted as [string, string, string];
    const queue = async (query = "") =>
      (
        await admin<{ data: { id: string; priority: boolean }[]; has_more: boolean }>(
          w.svc,
          "GET",
          `/reviews${query}`,
        )
      ).body;
    // Queued by the review job meanwhile or not, they wait for review (the tenant has no auto review).
    assert.deepEqual(
      (await queue()).data.map((r) => r.id),
      [first, second, third],
    );

    const bought = await key<Order>("POST", `/releases/${third}/add-ons`, { add_on: "priority_review" });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const now = await queue();
    assert.deepEqual(
      now.data.map((r) => [r.id, r.priority]),
      [
        [third, true],
        [first, false],
        [second, false],
      ],
    );
    // Page by page (limit 1), the same order.
    const walked: string[] = [];
    let after = "";
    for (;;) {
      const page = await queue(`?limit=1${after ? `&starting_after=${after}` : ""}`);
      walked.push(...page.data.map((r) => r.id));
      if (!page.has_more) break;
      after = page.data.at(-1)?.id ?? "";
    }
    assert.deepEqual(walked, [third, first, second]);
    // The console's CLI twin sorts the same (src/pipeline/review.ts).
    const { reviewQueue } = await import("../src/pipeline/review.ts");
    assert.deepEqual(
      (await reviewQueue(db(), w.tenant.id)).map((r) => r.id),
      [third, first, second],
    );
  });

  describe("with a worker delivering", () => {
    let worker: Worker;
    before(() => {
      worker = new Worker({ db: db(), handlers: pipelineHandlers(db()), pollMs: 20 });
      worker.start();
    });
    after(async () => {
      await worker?.stop();
    });

    const storesOf = async (id: string) =>
      (
        await sql<{ store: string }>(
          "select distinct store from internal.release_deliveries where release_id = $1 order by store",
          [id],
        )
      ).map((d) => d.store);
    const settled = async (id: string) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const [r] = await sql<{ status: string }>("select status from public.releases where id = $1", [id]);
        const open = await sql(
          `select 1 from internal.jobs j where j.status in ('queued', 'running')
             and (j.payload ->> 'release_id' = $1::text or j.payload ->> 'delivery_id' in
               (select d.id::text from internal.release_deliveries d where d.release_id = $1::uuid))`,
          [id],
        );
        if (r?.status === "live" && open.length === 0) return;
        if (Date.now() > deadline) assert.fail(`release ${id} is ${r?.status}, ${open.length} jobs open`);
        await sleep(25);
      }
    };

    test("a store an add-on unlocks is delivered to only for releases that have it", async () => {
      const w = await world({ auto_review: true, delivery_adapter: "sandbox" });
      await define(w, APPLE);
      const key = publicApi(app.url, (await issueTestKey(db(), w.a)).secret);
      const release = async (title: string, addOn: boolean) => {
        const r = expectStatus(
          await key<{ id: string }>(
            "POST",
            "/releases",
            completeRelease({ title, services: ["spotify", "apple_music"] }),
          ),
          201,
        );
        expectStatus(
          await key("POST", `/releases/${r.id}/tracks`, { title, isrc: nextIsrc(), duration: 200 }),
          201,
        );
        if (addOn)
          expectStatus(await key("POST", `/releases/${r.id}/add-ons`, { add_on: "apple_music" }), 200);
        expectStatus(await key("POST", `/releases/${r.id}/submit`), 200);
        return r.id;
      };
      const without = await release("Without", false);
      const withIt = await release("With", true);
      await settled(without);
      await settled(withIt);
      assert.deepEqual(await storesOf(without), ["spotify"], "apple_music needs the add-on");
      assert.deepEqual(await storesOf(withIt), ["apple_music", "spotify"]);

      // Another tenant without such an add-on: apple_music as usual.
      const other = await world({ auto_review: true, delivery_adapter: "sandbox" });
      const otherKey = publicApi(app.url, (await issueTestKey(db(), other.a)).secret);
      const r = expectStatus(await otherKey<{ id: string }>("POST", "/releases", completeRelease()), 201);
      expectStatus(
        await otherKey("POST", `/releases/${r.id}/tracks`, { title: "x", isrc: nextIsrc(), duration: 200 }),
        201,
      );
      expectStatus(await otherKey("POST", `/releases/${r.id}/submit`), 200);
      await settled(r.id);
      assert.deepEqual(await storesOf(r.id), ["apple_music", "spotify"]);
    });
  });
});
