import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey, publicApi } from "./support/public-api.ts";
import { type SeedUser, seedAccount, seedStaffUser, seedUser, userToken } from "./support/seed.ts";

/**
 * The support desk (migration 0049; docs/operator.md "Support desk", docs/public-api.md "Support"),
 * over real HTTP: a member files a ticket through the public API, the tenant's staff answer it
 * through /admin/v1 (the member is notified and e-mailed), notes stay with the staff, a member's
 * reply reopens a solved ticket, another account's or tenant's ticket is 404, /rest/v1 does not
 * reach the tables, and the desk's figures count right.
 */

type Json = Record<string, unknown>;
type Ticket = Json & { id: string; status: string; replies: (Json & { body: string; author: string })[] };

describeEachEngine("support desk", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let a: Account;
  let b: Account;
  let c: Account;
  let owner: SeedUser;
  let reviewer: SeedUser;
  const tokens: Record<string, string> = {};
  // The anon key of each staff caller's tenant: /admin/v1 takes it with their token.
  const anonKeys: Record<string, string> = {};
  let releaseOfA = "";
  let releaseOfB = "";
  const db = (): Db => t().db;
  const sql = async <T = Json>(text: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Json>(text, params)).rows);

  before(async () => {
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t()));
    const other = await tenantWithKeys(t());
    a = await seedAccount(db(), tenant, "Label A");
    b = await seedAccount(db(), tenant, "Label B");
    c = await seedAccount(db(), other.tenant, "Label C");
    owner = await seedUser(db(), tenant, [{ account: a, role: "owner" }]);
    const member = await seedUser(db(), tenant, [{ account: a, role: "member" }]);
    const ownerB = await seedUser(db(), tenant, [{ account: b, role: "owner" }]);
    const ownerC = await seedUser(db(), other.tenant, [{ account: c, role: "owner" }]);
    reviewer = await seedStaffUser(db(), tenant, [{ of: tenant, role: "reviewer" }]);
    const otherStaff = await seedStaffUser(db(), other.tenant, [{ of: other.tenant, role: "admin" }]);
    const issuer = `${app.url}/auth/v1`;
    tokens.owner = await userToken(db(), tenant, owner, issuer);
    tokens.member = await userToken(db(), tenant, member, issuer);
    tokens.ownerB = await userToken(db(), tenant, ownerB, issuer);
    tokens.ownerC = await userToken(db(), other.tenant, ownerC, issuer);
    tokens.reviewer = await userToken(db(), tenant, reviewer, issuer);
    tokens.otherStaff = await userToken(db(), other.tenant, otherStaff, issuer);
    anonKeys.reviewer = keys.anon_key;
    anonKeys.otherStaff = other.keys.anon_key;
    for (const [account, set] of [
      [a, (id: string) => (releaseOfA = id)],
      [b, (id: string) => (releaseOfB = id)],
    ] as const) {
      const [artist] = await sql<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, 'Luna') returning id",
        [account.id],
      );
      const [release] = await sql<{ id: string }>(
        "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Night Drive') returning id",
        [account.id, artist?.id],
      );
      set(release?.id ?? "");
    }
  });
  after(async () => {
    await app?.close();
  });

  const member =
    (who: string, account: Account) =>
    async <T = Json>(method: string, path: string, body?: unknown) =>
      publicApi(app.url, tokens[who])<T>(method, path, body, { "backline-account": account.id });
  const admin = async <T = Json>(who: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${tokens[who]}`,
        apikey: anonKeys[who] ?? "",
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  };

  async function file(subject: string, about?: unknown): Promise<Ticket> {
    const r = await member("owner", a)<Ticket>("POST", "/tickets", {
      subject,
      body: `Help with ${subject}`,
      ...(about !== undefined ? { about } : {}),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  }

  test("a member files a ticket about a release; staff see it in the queue, answer and note; the member is notified and e-mailed, never sees the note", async () => {
    const ticket = await file("Cover rejected", { type: "release", id: releaseOfA });
    assert.equal(ticket.status, "open");
    assert.deepEqual(ticket.about, { type: "release", id: releaseOfA });
    assert.equal(ticket.replies.length, 1);
    assert.equal(ticket.replies[0]?.author, "member");

    const queue = await admin<{ data: Json[] }>("reviewer", "GET", "/tickets?status=open");
    assert.equal(queue.status, 200, JSON.stringify(queue.body));
    const row = queue.body.data.find((x) => x.id === ticket.id);
    assert.equal(row?.account_name, "Label A");
    assert.equal(row?.opened_by_email, owner.email);

    const note = await admin<Ticket>("reviewer", "POST", `/tickets/${ticket.id}/replies`, {
      body: "Internal: the artist has two rejections already",
      internal: true,
    });
    assert.equal(note.status, 201, JSON.stringify(note.body));
    assert.equal(note.body.status, "open", "a note changes nothing the member sees");
    const answered = await admin<Ticket>("reviewer", "POST", `/tickets/${ticket.id}/replies`, {
      body: "The cover shows a URL; please upload one without it.",
    });
    assert.equal(answered.status, 201);
    assert.equal(answered.body.status, "waiting");
    assert.deepEqual(
      answered.body.replies.map((r) => [r.author, r.internal]),
      [
        ["member", false],
        ["staff", true],
        ["staff", false],
      ],
    );

    // The member's view: the reply, not the note, on both the ticket and the list.
    const seen = await member("member", a)<Ticket>("GET", `/tickets/${ticket.id}`);
    assert.equal(seen.status, 200);
    assert.equal(seen.body.status, "waiting");
    assert.deepEqual(
      seen.body.replies.map((r) => r.body),
      ["Help with Cover rejected", "The cover shows a URL; please upload one without it."],
    );
    assert.ok(!JSON.stringify(seen.body).includes("Internal:"));
    // Notified: the opener (only), with the ticket's id.
    const notes = await sql<{ user_id: string; data: Json }>(
      "select user_id, data from public.notifications where kind = 'ticket.replied' and data ->> 'ticket_id' = $1",
      [ticket.id],
    );
    assert.deepEqual(
      notes.map((n) => n.user_id),
      [owner.id],
    );
    const mails = await sql<{ to_address: string; subject: string; text_body: string }>(
      "select to_address, subject, text_body from internal.mail_outbox where kind = 'ticket.replied' and tenant_id = $1",
      [tenant.id],
    );
    assert.equal(mails.length, 1);
    assert.equal(mails[0]?.to_address, owner.email);
    assert.equal(mails[0]?.subject, "Re: Cover rejected");
    assert.match(mails[0]?.text_body ?? "", /please upload one without it/);
    assert.match(mails[0]?.text_body ?? "", new RegExp(`/portal/.*support/${ticket.id}`));
    assert.ok(!mails[0]?.text_body.includes("Internal:"));

    // At the database: a member's own query returns no note, even asked for one.
    const asMember = await db().withRequestContext(
      { role: "authenticated", sub: owner.id, tenant_id: tenant.id, aud: "authenticated" },
      async (tx) =>
        (
          await tx.query("select body from internal.ticket_replies where ticket_id = $1 and is_internal", [
            ticket.id,
          ])
        ).rows,
    );
    assert.deepEqual(asMember, []);

    // Solved, then the member's reply opens it again.
    const solved = await admin<Ticket>("reviewer", "PATCH", `/tickets/${ticket.id}`, { status: "solved" });
    assert.equal(solved.body.status, "solved");
    assert.ok(solved.body.solved_at);
    const again = await member("owner", a)("POST", `/tickets/${ticket.id}/replies`, {
      body: "It happened again.",
    });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    const reopened = await member("owner", a)<Ticket>("GET", `/tickets/${ticket.id}`);
    assert.equal(reopened.body.status, "open");
    assert.equal(reopened.body.solved_at, null);
  });

  test("a ticket is about the account's own objects only, and bad input is a 422 naming the field", async () => {
    const foreign = await member("owner", a)("POST", "/tickets", {
      subject: "Not mine",
      body: "x",
      about: { type: "release", id: releaseOfB },
    });
    assert.equal(foreign.status, 422, JSON.stringify(foreign.body));
    assert.equal((foreign.body as Json).param, "about.id");
    const bad = await member("owner", a)<{ errors: { param: string }[] }>("POST", "/tickets", {
      subject: "",
      body: "x",
      about: { type: "invoice", id: releaseOfA },
    });
    assert.equal(bad.status, 422);
    assert.deepEqual(bad.body.errors.map((e) => e.param).sort(), ["about.type", "subject"]);
    const general = await file("A general question");
    assert.equal(general.about, null);
    const [count] = await sql<{ n: number }>(
      "select count(*)::int as n from internal.tickets where subject = 'Not mine'",
    );
    assert.equal(count?.n, 0);
  });

  test("another account's and another tenant's tickets are 404; a viewer-scoped key cannot file; the list is the account's", async () => {
    const ticket = await file("Payout late");
    for (const [who, account] of [
      ["ownerB", b],
      ["ownerC", c],
    ] as const) {
      const r = await member(who, account)("GET", `/tickets/${ticket.id}`);
      assert.equal(r.status, 404, `${who}: ${JSON.stringify(r.body)}`);
      const reply = await member(who, account)("POST", `/tickets/${ticket.id}/replies`, { body: "me too" });
      assert.equal(reply.status, 404);
      const list = await member(who, account)<{ data: Json[] }>("GET", "/tickets");
      assert.ok(!list.body.data.some((x) => x.id === ticket.id));
    }
    // Staff of another tenant: not_found through /admin/v1 (their tenant is theirs).
    const foreignStaff = await admin("otherStaff", "GET", `/tickets/${ticket.id}`);
    assert.equal(foreignStaff.status, 404);
    const mine = await member("owner", a)<{ data: Json[]; total: number }>("GET", "/tickets");
    assert.ok(mine.body.data.every((x) => x.account_id === a.id));
    assert.ok(mine.body.data.some((x) => x.id === ticket.id));
    // An API key of account A works too; a read-only one cannot file.
    const key = await issueTestKey(db(), a, { scopes: ["catalog:read"] });
    const listed = await publicApi(app.url, key.secret)<{ data: Json[] }>("GET", "/tickets");
    assert.equal(listed.status, 200);
    assert.ok(listed.body.data.some((x) => x.id === ticket.id));
    const refused = await publicApi(app.url, key.secret)("POST", "/tickets", { subject: "x", body: "y" });
    assert.equal(refused.status, 403);
  });

  test("/rest/v1 reaches neither table", async () => {
    await file("Through the table interface?");
    for (const table of ["tickets", "ticket_replies"]) {
      for (const profile of [undefined, "internal"]) {
        const res = await fetch(`${app.url}/rest/v1/${table}?select=*`, {
          headers: {
            apikey: keys.anon_key,
            authorization: `Bearer ${tokens.owner}`,
            ...(profile ? { "accept-profile": profile } : {}),
          },
        });
        const body = await res.text();
        assert.ok(res.status >= 400 && res.status < 500, `${table} ${profile}: ${res.status} ${body}`);
      }
    }
  });

  test("a reviewer reads the tenant's tickets, assigns, and the queue keeps its order; the figures are right", async () => {
    const first = await file("Queue one");
    const second = await file("Queue two");
    const queue = await admin<{ data: (Json & { id: string; status: string })[] }>(
      "reviewer",
      "GET",
      "/tickets",
    );
    assert.equal(queue.status, 200);
    const ids = queue.body.data.map((x) => x.id);
    assert.ok(ids.indexOf(first.id) < ids.indexOf(second.id), "oldest waiting first");
    const statuses = queue.body.data.map((x) => x.status);
    const rank = (s: string) => ["open", "waiting", "solved"].indexOf(s);
    assert.deepEqual(
      statuses,
      [...statuses].sort((x, y) => rank(x) - rank(y)),
      "open before waiting before solved",
    );
    // Keyset pages walk the same order.
    const p1 = await admin<{ data: Json[]; has_more: boolean }>("reviewer", "GET", "/tickets?limit=2");
    const p2 = await admin<{ data: Json[] }>(
      "reviewer",
      "GET",
      `/tickets?limit=2&starting_after=${p1.body.data[1]?.id}`,
    );
    assert.deepEqual(
      [...p1.body.data, ...p2.body.data].map((x) => x.id),
      ids.slice(0, 2 + p2.body.data.length),
    );

    const assigned = await admin<Json>("reviewer", "PATCH", `/tickets/${first.id}`, {
      assignee_user_id: reviewer.id,
    });
    assert.equal(assigned.status, 200, JSON.stringify(assigned.body));
    assert.equal(assigned.body.assignee_email, reviewer.email);
    const notStaff = await admin<{ param: string }>("reviewer", "PATCH", `/tickets/${first.id}`, {
      assignee_user_id: owner.id,
    });
    assert.equal(notStaff.status, 400);
    assert.equal(notStaff.body.param, "assignee_user_id");
    const mine = await admin<{ data: Json[] }>("reviewer", "GET", "/tickets?assignee=me");
    assert.deepEqual(
      mine.body.data.map((x) => x.id),
      [first.id],
    );

    // The reviewer's own token reads the tenant's tickets at the database too (row security).
    const readable = await db().withRequestContext(
      { role: "authenticated", sub: reviewer.id, tenant_id: tenant.id, aud: "authenticated" },
      async (tx) =>
        (await tx.query<{ n: number }>("select count(*)::int as n from internal.tickets")).rows[0]?.n,
    );
    const [all] = await sql<{ n: number }>(
      "select count(*)::int as n from internal.tickets where tenant_id = $1",
      [tenant.id],
    );
    assert.equal(readable, all?.n);

    // Figures: first replies after 60 s and 180 s (set in the past), one unanswered: median 120 s.
    await sql(
      `update internal.tickets set created_at = now() - interval '1 hour', first_reply_at = null
       where tenant_id = $1`,
      [tenant.id],
    );
    await sql(
      "update internal.tickets set first_reply_at = created_at + interval '60 seconds' where id = $1",
      [first.id],
    );
    await sql(
      "update internal.tickets set first_reply_at = created_at + interval '180 seconds' where id = $1",
      [second.id],
    );
    const counts = await sql<{ open: number; waiting: number; solved: number; total: number }>(
      `select count(*) filter (where status = 'open')::int as open, count(*) filter (where status = 'waiting')::int as waiting,
         count(*) filter (where status = 'solved')::int as solved, count(*)::int as total
       from internal.tickets where tenant_id = $1`,
      [tenant.id],
    );
    const stats = await admin<Json>("reviewer", "GET", "/tickets/stats");
    assert.equal(stats.status, 200, JSON.stringify(stats.body));
    assert.equal(stats.body.median_first_reply_seconds, 120);
    assert.equal(stats.body.answered_in_window, 2);
    assert.equal(stats.body.opened_in_window, counts[0]?.total);
    assert.equal(stats.body.open, counts[0]?.open);
    assert.equal(stats.body.waiting, counts[0]?.waiting);
    assert.equal(stats.body.solved, counts[0]?.solved);
    // Another tenant's desk counts nothing of this one.
    const otherStats = await admin<Json>("otherStaff", "GET", "/tickets/stats");
    assert.equal(otherStats.body.opened_in_window, 0);
    // A bad query is 400 naming it.
    const bad = await admin<{ param: string }>("reviewer", "GET", "/tickets/stats?days=0");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.param, "days");
  });
});
