import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import { operatorScope } from "../src/db/operator-scope.ts";
import type { Claims } from "../src/db/types.ts";
import { Mailer } from "../src/mail/mailer.ts";
import { decideReview } from "../src/pipeline/review.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { addStaff, listStaff, removeStaff, StaffError } from "../src/tenancy/staff.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  type ApiResponse,
  assertProblem,
  completeRelease,
  expectStatus,
  isrcs,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import {
  forceReleaseStatus,
  type SeedUser,
  seedAccount,
  seedStaffUser,
  userClaims,
  userToken,
} from "./support/seed.ts";

/**
 * Staff roles (migration 0019, src/admin/auth.ts, docs/console.md "Staff roles"): /admin/v1 with a
 * staff user's access token and Backline-Tenant, each route's role, the database's own check in
 * the act's transaction, GET /admin/v1/me, what staff read through /rest/v1, the staff functions
 * behind `backline staff`, and GET /console/tenant.json. Real HTTP over a socket; releases made
 * through the public API. No worker runs: a submitted release waits for its review.
 */

type Obj = Record<string, unknown>;
type Role = "reviewer" | "operator" | "admin";
const nextIsrc = isrcs("QZSTF");

describeEachEngine("staff roles", (t) => {
  const db = () => t().db;
  const rows = <T extends Obj>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);

  describe("over HTTP", () => {
    let app: RunningApp;
    let a: { tenant: Tenant; keys: TenantKeys };
    let b: { tenant: Tenant; keys: TenantKeys };
    let apiA: ReturnType<typeof publicApi>;
    let apiB: ReturnType<typeof publicApi>;

    before(async () => {
      app = await startApp(t());
      a = await tenantWithKeys(t());
      b = await tenantWithKeys(t());
      apiA = publicApi(app.url, (await keyedAccount(db(), { tenant: a.tenant })).key.secret);
      apiB = publicApi(app.url, (await keyedAccount(db(), { tenant: b.tenant })).key.secret);
    });
    after(async () => {
      await app?.close();
    });

    /** A user of `tenant` (proven address unless said), staff where `roles` say, and their access token. */
    async function person(
      tenant: Tenant,
      roles: { of: Tenant | "platform"; role: Role }[] = [],
      options: { proven?: boolean } = {},
    ): Promise<{ user: SeedUser; token: string; claims: Claims }> {
      const user = await seedStaffUser(db(), tenant, roles, options);
      const token = await userToken(db(), tenant, user, `${app.url}/auth/v1`);
      return { user, token, claims: userClaims(user) };
    }

    const keysOf = (tenant: Tenant) => (tenant.id === a.tenant.id ? a.keys : b.keys);

    /** Calls /admin/v1 as `who` (a user's token with their tenant's anon key, or a service key). */
    async function admin<T = Obj>(
      who: { token: string; user: SeedUser } | { serviceKey: string },
      method: string,
      path: string,
      options: { tenant?: string; body?: unknown } = {},
    ): Promise<ApiResponse<T>> {
      const headers: Record<string, string> =
        "serviceKey" in who
          ? { apikey: who.serviceKey }
          : {
              apikey: keysOf(who.user.tenant_id === a.tenant.id ? a.tenant : b.tenant).anon_key,
              authorization: `Bearer ${who.token}`,
            };
      if (options.tenant !== undefined) headers["backline-tenant"] = options.tenant;
      if (options.body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(`${app.url}/admin/v1${path}`, {
        method,
        headers,
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as T };
    }

    /** A complete release submitted through the public API (no worker: it waits for review). */
    async function submitted(api: ReturnType<typeof publicApi>): Promise<string> {
      const release = expectStatus(await api<{ id: string }>("POST", "/releases", completeRelease()), 201);
      expectStatus(
        await api("POST", `/releases/${release.id}/tracks`, {
          title: "Night Drive",
          isrc: nextIsrc(),
          duration: 200,
        }),
        201,
      );
      expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
      return release.id;
    }
    const statusOf = async (id: string) =>
      (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;

    test("GET /me: the user, their own tenant, their platform role and every tenant they are staff of", async () => {
      const reviewer = await person(a.tenant, [{ of: a.tenant, role: "reviewer" }]);
      const me = expectStatus(await admin(reviewer, "GET", "/me"), 200);
      assert.deepEqual(me, {
        user: { id: reviewer.user.id, email: reviewer.user.email },
        tenant_id: a.tenant.id,
        platform_role: null,
        staff: [
          {
            tenant_id: a.tenant.id,
            tenant_slug: a.tenant.slug,
            tenant_name: a.tenant.name,
            role: "reviewer",
          },
        ],
      });

      // A user of tenant B who is staff of A (operator) and of B (reviewer): both, each with its role.
      const both = await person(b.tenant, [
        { of: a.tenant, role: "operator" },
        { of: b.tenant, role: "reviewer" },
      ]);
      const theirs = expectStatus(await admin<{ staff: Obj[]; tenant_id: string }>(both, "GET", "/me"), 200);
      assert.equal(theirs.tenant_id, b.tenant.id);
      assert.deepEqual(
        theirs.staff.map((s) => [s.tenant_id, s.role]).sort(),
        [
          [a.tenant.id, "operator"],
          [b.tenant.id, "reviewer"],
        ].sort(),
      );

      // Platform staff: every tenant, the higher of the platform role and a tenant's own row.
      const platform = await person(b.tenant, [
        { of: "platform", role: "reviewer" },
        { of: a.tenant, role: "admin" },
      ]);
      const seen = expectStatus(
        await admin<{ platform_role: string; staff: { tenant_id: string; role: string }[] }>(
          platform,
          "GET",
          "/me",
        ),
        200,
      );
      assert.equal(seen.platform_role, "reviewer");
      const roleOn = (id: string) => seen.staff.find((s) => s.tenant_id === id)?.role;
      assert.equal(roleOn(a.tenant.id), "admin");
      assert.equal(roleOn(b.tenant.id), "reviewer");

      // A tenant's service-role key: no user, its own tenant as admin.
      assert.deepEqual(
        expectStatus(await admin({ serviceKey: a.keys.service_role_key }, "GET", "/me"), 200),
        {
          user: null,
          tenant_id: a.tenant.id,
          platform_role: null,
          staff: [
            { tenant_id: a.tenant.id, tenant_slug: a.tenant.slug, tenant_name: a.tenant.name, role: "admin" },
          ],
        },
      );

      // Not staff anywhere, or staff only once the address is proven: 403 not_staff.
      assertProblem(await admin(await person(a.tenant), "GET", "/me"), 403, "not_staff");
      const unproven = await person(a.tenant, [{ of: a.tenant, role: "admin" }], { proven: false });
      assertProblem(await admin(unproven, "GET", "/me"), 403, "not_staff");
    });

    test("a reviewer reviews but may not retry deliveries or import royalties (403 insufficient_role); an operator may; the decision records who made it", async () => {
      const reviewer = await person(a.tenant, [{ of: a.tenant, role: "reviewer" }]);
      const operator = await person(a.tenant, [{ of: a.tenant, role: "operator" }]);
      const id = await submitted(apiA);

      const queue = expectStatus(await admin<{ data: { id: string }[] }>(reviewer, "GET", "/reviews"), 200);
      assert.ok(queue.data.some((r) => r.id === id));
      const denied = assertProblem(
        await admin(reviewer, "POST", `/releases/${id}/deliveries/retry`),
        403,
        "insufficient_role",
      );
      assert.match(denied.detail, /operator/);
      assertProblem(await admin(reviewer, "GET", `/releases/${id}/deliveries`), 403, "insufficient_role");
      assertProblem(await admin(reviewer, "GET", "/royalty-imports"), 403, "insufficient_role");

      assert.deepEqual(expectStatus(await admin(reviewer, "POST", `/releases/${id}/approve`), 200), {
        id,
        status: "approved",
        status_reason: null,
      });
      const [decided] = await rows<{ actor_role: string; actor_user_id: string }>(
        "select actor_role, actor_user_id from internal.release_history where release_id = $1 and to_status = 'approved'",
        [id],
      );
      assert.deepEqual(decided, { actor_role: "service_role", actor_user_id: reviewer.user.id });

      assert.deepEqual(expectStatus(await admin(operator, "POST", `/releases/${id}/deliveries/retry`), 200), {
        release_id: id,
        retried: 0,
      });
      expectStatus(await admin(operator, "GET", "/royalty-imports"), 200);
      // An operator reviews too (roles are cumulative).
      const other = await submitted(apiA);
      expectStatus(
        await admin(operator, "POST", `/releases/${other}/reject`, { body: { reason: "Blurry cover" } }),
        200,
      );
    });

    test("another tenant's staff: 403 not_staff with Backline-Tenant, 404 for the tenant's ids in their own; nothing changes", async () => {
      const reviewerB = await person(b.tenant, [{ of: b.tenant, role: "admin" }]);
      const id = await submitted(apiA);
      assertProblem(await admin(reviewerB, "GET", "/reviews", { tenant: a.tenant.id }), 403, "not_staff");
      assertProblem(await admin(reviewerB, "GET", "/reviews", { tenant: a.tenant.slug }), 403, "not_staff");
      assertProblem(
        await admin(reviewerB, "POST", `/releases/${id}/approve`, { tenant: a.tenant.id }),
        403,
        "not_staff",
      );
      assertProblem(await admin(reviewerB, "POST", `/releases/${id}/approve`), 404, "not_found");
      const own = expectStatus(await admin<{ data: { id: string }[] }>(reviewerB, "GET", "/reviews"), 200);
      assert.ok(!own.data.some((r) => r.id === id), "tenant A's release is not in B's queue");
      // An unknown tenant is refused as one the caller is not staff of; a malformed name is 400.
      assertProblem(await admin(reviewerB, "GET", "/reviews", { tenant: randomUUID() }), 403, "not_staff");
      assertProblem(
        await admin(reviewerB, "GET", "/reviews", { tenant: "no-such-tenant" }),
        403,
        "not_staff",
      );
      assertProblem(
        await admin(reviewerB, "GET", "/reviews", { tenant: "Bad Name!" }),
        400,
        "invalid_tenant",
      );
      // A tenant's service key acts on its own tenant only.
      assertProblem(
        await admin({ serviceKey: b.keys.service_role_key }, "GET", "/reviews", { tenant: a.tenant.id }),
        403,
        "not_staff",
      );
      assert.equal(await statusOf(id), "submitted");
    });

    test("a user who is not staff is 403 not_staff on every route, and so is an unproven address", async () => {
      const nobody = await person(a.tenant);
      const account = await seedAccount(db(), a.tenant);
      const member = await person(a.tenant);
      await rows(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [a.tenant.id, account.id, member.user.id],
      );
      const unproven = await person(a.tenant, [{ of: a.tenant, role: "admin" }], { proven: false });
      const id = await submitted(apiA);
      for (const who of [nobody, member, unproven]) {
        assertProblem(await admin(who, "GET", "/reviews"), 403, "not_staff");
        assertProblem(await admin(who, "POST", `/releases/${id}/approve`), 403, "not_staff");
        assertProblem(await admin(who, "GET", "/royalty-imports"), 403, "not_staff");
      }
      assert.equal(await statusOf(id), "submitted");
    });

    test("platform staff reach any tenant through Backline-Tenant (id or slug), their own tenant without it", async () => {
      const platform = await person(b.tenant, [{ of: "platform", role: "operator" }]);
      const inA = await submitted(apiA);
      const inB = await submitted(apiB);
      const ids = async (tenant?: string) =>
        expectStatus(
          await admin<{ data: { id: string }[] }>(platform, "GET", "/reviews", tenant ? { tenant } : {}),
          200,
        ).data.map((r) => r.id);
      assert.ok((await ids(a.tenant.id)).includes(inA));
      assert.ok(!(await ids(a.tenant.id)).includes(inB));
      assert.ok((await ids(a.tenant.slug)).includes(inA));
      assert.ok((await ids()).includes(inB));
      expectStatus(await admin(platform, "POST", `/releases/${inA}/approve`, { tenant: a.tenant.slug }), 200);
      assert.equal(await statusOf(inA), "approved");
      expectStatus(
        await admin(platform, "POST", `/releases/${inA}/deliveries/retry`, { tenant: a.tenant.id }),
        200,
      );
    });

    test("a staff row removed or lowered takes effect at the next request", async () => {
      const operator = await person(a.tenant, [{ of: a.tenant, role: "operator" }]);
      const id = await submitted(apiA);
      expectStatus(await admin(operator, "POST", `/releases/${id}/deliveries/retry`), 200);
      await rows("update internal.staff set role = 'reviewer' where user_id = $1", [operator.user.id]);
      assertProblem(
        await admin(operator, "POST", `/releases/${id}/deliveries/retry`),
        403,
        "insufficient_role",
      );
      expectStatus(await admin(operator, "GET", "/reviews"), 200);
      await rows("delete from internal.staff where user_id = $1", [operator.user.id]);
      assertProblem(await admin(operator, "GET", "/reviews"), 403, "not_staff");
      assertProblem(await admin(operator, "POST", `/releases/${id}/approve`), 403, "not_staff");
      assertProblem(await admin(operator, "GET", "/me"), 403, "not_staff");
      assert.equal(await statusOf(id), "submitted");
    });

    test("staff read their tenant's releases through /rest/v1 with their own token; others do not", async () => {
      const reviewer = await person(a.tenant, [{ of: a.tenant, role: "reviewer" }]);
      const nobody = await person(a.tenant);
      const platform = await person(b.tenant, [{ of: "platform", role: "reviewer" }]);
      const id = await submitted(apiA);
      const read = async (who: { token: string; user: SeedUser }, table: string) => {
        const res = await fetch(`${app.url}/rest/v1/${table}?select=id`, {
          headers: {
            apikey: keysOf(who.user.tenant_id === a.tenant.id ? a.tenant : b.tenant).anon_key,
            authorization: `Bearer ${who.token}`,
          },
        });
        assert.equal(res.status, 200);
        return ((await res.json()) as { id: string }[]).map((r) => r.id);
      };
      assert.ok((await read(reviewer, "releases")).includes(id));
      assert.deepEqual(await read(nobody, "releases"), []);
      // Through /rest/v1 a platform reviewer reads the tenant of their token (B), not A.
      assert.ok(!(await read(platform, "releases")).includes(id));
      // Takedown requests are an operator's to read, not a reviewer's.
      const operator = await person(a.tenant, [{ of: a.tenant, role: "operator" }]);
      const live = await submitted(apiA);
      await forceReleaseStatus(db(), live, "live");
      const [takedown] = await rows<{ id: string }>(
        `insert into public.takedown_requests (release_id, account_id, reason)
         select id, account_id, 'Rights dispute' from public.releases where id = $1 returning id`,
        [live],
      );
      assert.deepEqual(await read(operator, "takedown_requests"), [takedown?.id]);
      assert.deepEqual(await read(reviewer, "takedown_requests"), []);
    });

    test("the database refuses an operator act by itself: require_staff with a non-staff caller's claims, and a pipeline function run for them directly", async () => {
      const nobody = await person(a.tenant);
      const reviewer = await person(a.tenant, [{ of: a.tenant, role: "reviewer" }]);
      const id = await submitted(apiA);
      const refusal = async (claims: Claims, need: string) => {
        try {
          await db().withRequestContext(claims, (tx) =>
            tx.query("select internal.require_staff($1, $2)", [a.tenant.id, need]),
          );
        } catch (error) {
          const e = asDbError(error);
          return [e?.sqlstate, e?.hint];
        }
        return "allowed";
      };
      assert.deepEqual(await refusal(nobody.claims, "reviewer"), ["42501", "not_staff"]);
      assert.deepEqual(await refusal(reviewer.claims, "operator"), ["42501", "insufficient_role"]);
      assert.deepEqual(await refusal(reviewer.claims, "platform"), ["42501", "insufficient_role"]);
      assert.equal(await refusal(reviewer.claims, "reviewer"), "allowed");
      // A token may not claim to be an operator transaction: staff_caller counts under service_role only.
      assert.deepEqual(
        await refusal(
          { ...nobody.claims, staff_caller: { role: "tenant_service", tenant_id: a.tenant.id } },
          "reviewer",
        ),
        ["42501", "not_staff"],
      );
      // The pipeline's own function, run for a non-staff caller as if the HTTP check were skipped:
      // its first statement is the database's check, and the release does not move.
      await assert.rejects(
        operatorScope.run({ claims: nobody.claims, tenantId: a.tenant.id, need: "reviewer" }, () =>
          decideReview(db(), id, { approve: true }, { tenantId: a.tenant.id }),
        ),
        (error: unknown) => asDbError(error)?.sqlstate === "42501",
      );
      assert.equal(await statusOf(id), "submitted");
      // The same call for the reviewer goes through.
      const done = await operatorScope.run(
        { claims: reviewer.claims, tenantId: a.tenant.id, need: "reviewer" },
        () => decideReview(db(), id, { approve: true }, { tenantId: a.tenant.id }),
      );
      assert.equal(done.status, "approved");
    });
  });

  describe("backline staff (the functions behind the commands)", () => {
    test("add: an address without a user is invited and counts once proven; a proven user is added at once; list; remove", async () => {
      const { tenant } = await tenantWithKeys(t());
      const mailer = new Mailer(db(), { smtpUrl: undefined, from: "backline@example.com" });
      const mail = {
        mailer,
        publicUrl: "https://api.example.com",
        redirectTo: "https://api.example.com/console/",
      };
      try {
        const email = `Ops-${randomUUID().slice(0, 6)}@Example.com`;
        const invited = await addStaff(db(), { tenant: tenant.slug, email, role: "operator" }, mail);
        assert.equal(invited.status, "invited");
        assert.equal(invited.staff.email, email.toLowerCase());
        assert.equal(invited.staff.active, false);
        assert.deepEqual([invited.staff.tenant_id, invited.staff.role], [tenant.id, "operator"]);
        assert.match(
          invited.invite_link ?? "",
          /^https:\/\/api\.example\.com\/auth\/v1\/verify\?token=.+&type=invite&redirect_to=/,
        );
        const [mailed] = await rows<{ kind: string }>(
          "select kind from internal.mail_outbox where to_address = $1 order by created_at desc",
          [email.toLowerCase()],
        );
        assert.equal(mailed?.kind, "auth.invite");

        // Once the address is proven, the row counts; adding again changes the role.
        await rows("update internal.users set email_proven_at = now() where id = $1", [
          invited.staff.user_id,
        ]);
        const again = await addStaff(db(), { tenant: tenant.id, email, role: "admin" }, mail);
        assert.deepEqual(
          [again.status, again.staff.role, again.staff.active, again.invite_link],
          ["added", "admin", true, null],
        );

        // Platform staff: a user of the tenant named by userTenant.
        const platform = await addStaff(
          db(),
          { platform: true, email, role: "reviewer", userTenant: tenant.slug },
          mail,
        );
        assert.deepEqual([platform.status, platform.staff.tenant_id], ["added", null]);

        const listed = await listStaff(db(), { tenant: tenant.slug });
        assert.deepEqual(
          listed.filter((s) => s.user_id === invited.staff.user_id).map((s) => [s.tenant_id, s.role]),
          [
            [null, "reviewer"],
            [tenant.id, "admin"],
          ],
        );
        assert.ok((await listStaff(db(), { platform: true })).every((s) => s.tenant_id === null));

        const removed = await removeStaff(db(), { tenant: tenant.slug, email });
        assert.equal(removed.role, "admin");
        await assert.rejects(removeStaff(db(), { tenant: tenant.slug, email }), StaffError);
        await removeStaff(db(), { platform: true, email, userTenant: tenant.slug });
        assert.deepEqual(
          (await listStaff(db())).filter((s) => s.user_id === invited.staff.user_id),
          [],
        );
      } finally {
        await mailer.close();
      }
    });

    test("refusals: unknown tenant, bad address, bad role, both or neither of --tenant and --platform", async () => {
      const mailer = new Mailer(db(), { smtpUrl: undefined, from: "backline@example.com" });
      const mail = { mailer, publicUrl: "https://api.example.com" };
      try {
        const { tenant } = await tenantWithKeys(t());
        const cases: [string, Parameters<typeof addStaff>[1], RegExp][] = [
          [
            "unknown tenant",
            { tenant: "no-such-tenant", email: "a@example.com", role: "reviewer" },
            /no tenant/,
          ],
          [
            "bad address",
            { tenant: tenant.slug, email: "not-an-address", role: "reviewer" },
            /not an e-mail/,
          ],
          ["bad role", { tenant: tenant.slug, email: "a@example.com", role: "boss" as Role }, /role must be/],
          [
            "both",
            { tenant: tenant.slug, platform: true, email: "a@example.com", role: "reviewer" },
            /not both/,
          ],
          ["neither", { email: "a@example.com", role: "reviewer" }, /--tenant/],
        ];
        for (const [name, input, message] of cases) {
          await assert.rejects(
            addStaff(db(), input, mail),
            (e: unknown) => e instanceof StaffError && message.test(e.message),
            name,
          );
        }
      } finally {
        await mailer.close();
      }
    });
  });

  describe("GET /console/tenant.json", () => {
    let app: RunningApp;
    let named: RunningApp;
    let tenant: Tenant;
    let keys: TenantKeys;
    before(async () => {
      ({ tenant, keys } = await tenantWithKeys(t()));
      app = await startApp(t());
      named = await startApp(t(), { CONSOLE_TENANT: tenant.slug });
    });
    after(async () => {
      await app?.close();
      await named?.close();
    });

    test("by slug: the tenant's id, slug, name, anon key, URL and branding; the key opens its /auth/v1", async () => {
      const res = await fetch(`${app.url}/console/tenant.json?slug=${tenant.slug}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("cache-control"), "no-cache");
      const body = (await res.json()) as Obj;
      assert.deepEqual(body, {
        id: tenant.id,
        slug: tenant.slug,
        name: tenant.name,
        anon_key: keys.anon_key,
        url: app.config.publicUrl,
        // The branding the console wears once signed in (the same public branding as the portal's).
        branding: {
          display_name: tenant.name,
          logo_url: null,
          primary_color: null,
          support_email: null,
          custom_css_url: null,
        },
      });
      const settings = await fetch(`${app.url}/auth/v1/settings`, {
        headers: { apikey: String(body.anon_key) },
      });
      assert.equal(settings.status, 200);
    });

    test("unknown slug 404, malformed slug 400, no slug: CONSOLE_TENANT or the development tenant, else 404", async () => {
      const status = async (url: string) => {
        const res = await fetch(url);
        return [res.status, ((await res.json()) as Obj).code ?? null];
      };
      assert.deepEqual(await status(`${app.url}/console/tenant.json?slug=no-such-tenant`), [
        404,
        "not_found",
      ]);
      assert.deepEqual(await status(`${app.url}/console/tenant.json?slug=Bad%20Slug`), [
        400,
        "invalid_request",
      ]);
      const dev = (
        await rows<{ id: string }>("select id from internal.tenants where is_development limit 1")
      )[0];
      const plain = await fetch(`${app.url}/console/tenant.json`);
      if (dev) assert.equal(((await plain.json()) as Obj).id, dev.id);
      else assert.deepEqual([plain.status, ((await plain.json()) as Obj).code], [404, "not_found"]);
      const res = await fetch(`${named.url}/console/tenant.json`);
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as Obj).id, tenant.id);
    });
  });
});
