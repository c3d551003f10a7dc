import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { totpCode, totpStep } from "../src/auth/totp.ts";
import { asDbError } from "../src/db/errors.ts";
import type { Claims } from "../src/db/types.ts";
import { listMail } from "../src/mail/mailer.ts";
import { createAccount } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { publicApi } from "./support/public-api.ts";

/**
 * Guessing codes (issue 37, docs/security.md "Guessing codes"): e-mailed codes are bounded per
 * address and MFA codes per challenge whatever the client address claims to be; reveal codes are
 * mailed a bounded number of times; a key the server already knows is audited as itself; the
 * events table is closed to request roles. Real server on a socket; supabase-js where a user would
 * use it, raw requests where a test must choose the client address.
 */

const PASSWORD = "Correct-Horse-7";
const newEmail = () => `guess-${randomUUID().slice(0, 8)}@example.com`;
const GENERIC = "Token has expired or is invalid";
const VOID =
  /Too many wrong codes were entered for this address: its codes no longer work\. Request a new code\./;

describeEachEngine(
  "guessing codes: per address, per code, per challenge, whatever the client address",
  (t) => {
    let app: RunningApp;
    before(async () => {
      // TRUST_PROXY: each request names its own client address, as an attacker behind a proxy
      // with many addresses would; the bounds below must hold all the same.
      app = await startApp(t(), { TRUST_PROXY: "true", WEBHOOK_ALLOW_PRIVATE: "true" });
    });
    after(async () => {
      await app?.close();
    });

    async function tenant(auth: Record<string, unknown> = {}) {
      const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false, ...auth } });
      const client = (): SupabaseClient =>
        createClient(app.url, keys.anon_key, { auth: { persistSession: false, autoRefreshToken: false } });
      /** The code of the newest mail of this kind to `email`. */
      const code = async (email: string, kind: string) => {
        const mail = (await listMail(t().db, { tenantId: tenant.id, to: email })).find(
          (m) => m.kind === kind,
        );
        const found = /enter this code: (\d{6})\b/.exec(mail?.text_body ?? "")?.[1];
        assert.ok(found, `no ${kind} code mailed to ${email}`);
        return found;
      };
      let n = 0;
      /** POST /auth/v1/verify from a client address of its own each time. */
      const verify = async (body: Record<string, unknown>) => {
        n++;
        const res = await fetch(`${app.url}/auth/v1/verify`, {
          method: "POST",
          headers: {
            apikey: keys.anon_key,
            "content-type": "application/json",
            "x-supabase-api-version": "2024-01-01",
            "x-forwarded-for": `203.0.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`,
          },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as { code?: string; message?: string } };
      };
      return { tenant, keys, client, code, verify };
    }
    type Env = Awaited<ReturnType<typeof tenant>>;

    async function userWithCodes(env: Env) {
      const email = newEmail();
      assert.equal((await env.client().auth.signUp({ email, password: PASSWORD })).error, null);
      assert.equal(
        (await env.client().auth.signInWithOtp({ email, options: { shouldCreateUser: false } })).error,
        null,
      );
      assert.equal((await env.client().auth.resetPasswordForEmail(email)).error, null);
      return {
        email,
        magic: await env.code(email, "auth.magiclink"),
        recovery: await env.code(email, "auth.recovery"),
      };
    }

    const wrong = (right: string, i = 0) => String((Number(right) + 1 + i) % 1_000_000).padStart(6, "0");

    test("five wrong codes for an address void its outstanding codes, each from another client address", async () => {
      const env = await tenant();
      const { email, magic, recovery } = await userWithCodes(env);
      for (let i = 0; i < 4; i++) {
        const r = await env.verify({ type: "email", email, token: wrong(magic, i) });
        assert.deepEqual(
          [r.status, r.body.code, r.body.message],
          [403, "otp_expired", GENERIC],
          `try ${i + 1}`,
        );
      }
      const fifth = await env.verify({ type: "email", email, token: wrong(magic, 4) });
      assert.equal(fifth.status, 403);
      assert.equal(fifth.body.code, "otp_expired");
      assert.match(fifth.body.message ?? "", VOID);

      // The right codes, the sign-in code and the recovery code alike, no longer work.
      for (const [type, token] of [
        ["email", magic],
        ["recovery", recovery],
      ] as const) {
        const r = await env.verify({ type, email, token });
        assert.equal(r.status, 403, type);
        assert.match(r.body.message ?? "", VOID, type);
      }
      const outstanding = await t().db.asService(
        async (tx) =>
          (
            await tx.query(
              `select 1 from internal.one_time_tokens o join internal.users u on u.id = o.user_id
             where u.email = $1 and o.used_at is null`,
              [email],
            )
          ).rowCount,
      );
      assert.equal(outstanding, 0, "every outstanding code of the address is void");

      // A new code mailed to the address starts again, and works.
      assert.equal(
        (await env.client().auth.signInWithOtp({ email, options: { shouldCreateUser: false } })).error,
        null,
      );
      const fresh = await env.code(email, "auth.magiclink");
      const ok = await env.client().auth.verifyOtp({ email, token: fresh, type: "email" });
      assert.equal(ok.error, null);
      assert.equal(ok.data.user?.email, email);
    });

    test("an address with no user answers the same, try for try (nothing tells which addresses exist)", async () => {
      const env = await tenant();
      const known = await userWithCodes(env);
      const unknown = newEmail();
      const answers = async (email: string) => {
        const out: string[] = [];
        for (let i = 0; i < 7; i++) {
          const r = await env.verify({ type: "email", email, token: wrong(known.magic, i) });
          out.push(`${r.status} ${r.body.code} ${VOID.test(r.body.message ?? "") ? "void" : r.body.message}`);
        }
        return out;
      };
      const forKnown = await answers(known.email);
      assert.deepEqual(await answers(unknown), forKnown);
      assert.deepEqual(forKnown, [
        ...Array(4).fill(`403 otp_expired ${GENERIC}`),
        ...Array(3).fill("403 otp_expired void"),
      ]);
    });

    test("guesses sent at once are counted one after another: exactly four are judged, the rest find the codes void", async () => {
      const env = await tenant();
      const { email, magic } = await userWithCodes(env);
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => env.verify({ type: "email", email, token: wrong(magic, i) })),
      );
      const generic = answers.filter((r) => r.body.message === GENERIC).length;
      const voided = answers.filter((r) => VOID.test(r.body.message ?? "")).length;
      assert.deepEqual({ generic, voided }, { generic: 4, voided: 8 });
      const failures = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ failures: number }>(
              "select failures from internal.email_code_failures where tenant_id = $1 and email = $2",
              [env.tenant.id, email],
            )
          ).rows[0]?.failures,
      );
      assert.equal(failures, 5);
      assert.match((await env.verify({ type: "email", email, token: magic })).body.message ?? "", VOID);
    });

    test("the bound is the tenant's max_code_attempts; a code mailed in between starts the count again", async () => {
      const env = await tenant({ max_code_attempts: 2 });
      const { email, magic } = await userWithCodes(env);
      assert.equal((await env.verify({ type: "email", email, token: wrong(magic) })).body.message, GENERIC);
      // A new code: the count starts again (the old sign-in code is replaced by it).
      assert.equal(
        (await env.client().auth.signInWithOtp({ email, options: { shouldCreateUser: false } })).error,
        null,
      );
      const fresh = await env.code(email, "auth.magiclink");
      assert.equal((await env.verify({ type: "email", email, token: wrong(fresh) })).body.message, GENERIC);
      assert.match(
        (await env.verify({ type: "email", email, token: wrong(fresh, 1) })).body.message ?? "",
        VOID,
      );
      assert.match((await env.verify({ type: "email", email, token: fresh })).body.message ?? "", VOID);
    });

    test("an invitation's code is void with the rest", async () => {
      const env = await tenant();
      const email = newEmail();
      const invite = await fetch(`${app.url}/auth/v1/invite`, {
        method: "POST",
        headers: {
          apikey: env.keys.service_role_key,
          authorization: `Bearer ${env.keys.service_role_key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ email }),
      });
      assert.equal(invite.status, 200, await invite.text());
      const code = await env.code(email, "auth.invite");
      for (let i = 0; i < 5; i++) await env.verify({ type: "invite", email, token: wrong(code, i) });
      assert.match((await env.verify({ type: "invite", email, token: code })).body.message ?? "", VOID);
    });

    test("an MFA challenge is void after five wrong codes; a new challenge works", async () => {
      const env = await tenant();
      const client = env.client();
      const email = newEmail();
      assert.equal((await client.auth.signUp({ email, password: PASSWORD })).error, null);
      const enrolled = await client.auth.mfa.enroll({ factorType: "totp" });
      assert.equal(enrolled.error, null);
      const factorId = enrolled.data?.id ?? "";
      const secret = enrolled.data?.totp.secret ?? "";
      const first = await client.auth.mfa.challengeAndVerify({
        factorId,
        code: totpCode(secret, totpStep()),
      });
      assert.equal(first.error, null);

      const challenge = await client.auth.mfa.challenge({ factorId });
      assert.equal(challenge.error, null);
      const challengeId = challenge.data?.id ?? "";
      // Far from the current time step: never a code the factor accepts.
      const bad = (i: number) => totpCode(secret, totpStep() + 100 + i);
      for (let i = 0; i < 4; i++) {
        const r = await client.auth.mfa.verify({ factorId, challengeId, code: bad(i) });
        assert.equal(r.error?.code, "mfa_verification_failed", `try ${i + 1}`);
      }
      const fifth = await client.auth.mfa.verify({ factorId, challengeId, code: bad(4) });
      assert.equal(fifth.error?.code, "mfa_challenge_expired");
      assert.match(fifth.error?.message ?? "", /Too many wrong codes .* Create a new challenge\./);
      const right = await client.auth.mfa.verify({
        factorId,
        challengeId,
        code: totpCode(secret, totpStep() + 1),
      });
      assert.equal(
        right.error?.code,
        "mfa_challenge_expired",
        "the right code on a void challenge is refused",
      );

      const again = await client.auth.mfa.challenge({ factorId });
      const ok = await client.auth.mfa.verify({
        factorId,
        challengeId: again.data?.id ?? "",
        code: totpCode(secret, totpStep() + 1),
      });
      assert.equal(ok.error, null);
    });

    // -------------------------------------------------------------------------------------------
    // API keys: reveal codes mailed, and the key behind each act

    /** An owner of a new account, signed up with supabase-js and joined as owner. */
    async function owner(env: Env) {
      const account = await createAccount(t().db, {
        tenantId: env.tenant.id,
        name: `Label ${randomUUID().slice(0, 6)}`,
      });
      const email = newEmail();
      await t().db.asService((tx) =>
        tx.query(
          "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'owner')",
          [env.tenant.id, account.id, email],
        ),
      );
      const { data, error } = await env.client().auth.signUp({ email, password: PASSWORD });
      assert.equal(error, null);
      await t().db.asService((tx) =>
        tx.query("update internal.users set email_proven_at = now() where id = $1", [data.user?.id]),
      );
      return { account, email, api: publicApi(app.url, data.session?.access_token) };
    }
    type Owner = Awaited<ReturnType<typeof owner>>;

    const revealCode = async (env: Env, who: Owner, name: string) => {
      const mails = await listMail(t().db, { tenantId: env.tenant.id, to: who.email });
      const mail = mails.find((m) => m.kind === "api_key.reveal" && m.text_body.includes(`"${name}"`));
      const code = /Verification code: (\d{6})\b/.exec(mail?.text_body ?? "")?.[1];
      assert.ok(code, `no reveal code for ${name}`);
      return code;
    };

    /** A key made by `who` with these scopes and revealed with the mailed code: its id and a client. */
    async function revealedKey(env: Env, who: Owner, name: string, scopes: string[]) {
      const made = await who.api<{ id: string }>("POST", "/api-keys", { name, scopes });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const revealed = await who.api<{ secret: string }>("POST", `/api-keys/${made.body.id}/reveal`, {
        code: await revealCode(env, who, name),
      });
      assert.equal(revealed.status, 200, JSON.stringify(revealed.body));
      return { id: made.body.id, api: publicApi(app.url, revealed.body.secret) };
    }

    test("reveal codes are mailed at most five times an hour per key and twenty per account", async () => {
      const env = await tenant();
      const who = await owner(env);
      const create = (name: string) => who.api<{ id: string }>("POST", "/api-keys", { name });
      const first = await create("first");
      assert.equal(first.status, 201);
      for (let i = 0; i < 4; i++) {
        const r = await who.api("POST", `/api-keys/${first.body.id}/verification`);
        assert.equal(r.status, 201, `new code ${i + 1}: ${JSON.stringify(r.body)}`);
      }
      const sixth = await who.api<{ code: string; detail: string }>(
        "POST",
        `/api-keys/${first.body.id}/verification`,
      );
      assert.equal(sixth.status, 429);
      assert.equal(sixth.body.code, "verification_codes_exceeded");
      assert.match(sixth.body.detail, /this key \(5 an hour\)/);
      assert.ok(Number(sixth.headers.get("retry-after")) >= 1);

      // Three more keys with five codes each: twenty for the account; the next key gets none.
      for (const name of ["second", "third", "fourth"]) {
        const key = await create(name);
        assert.equal(key.status, 201);
        for (let i = 0; i < 4; i++) {
          assert.equal((await who.api("POST", `/api-keys/${key.body.id}/verification`)).status, 201);
        }
      }
      const fifth = await create("fifth");
      assert.equal(fifth.status, 429);
      assert.equal((fifth.body as unknown as { code: string }).code, "verification_codes_exceeded");
      const mails = await listMail(t().db, { tenantId: env.tenant.id, to: who.email });
      assert.equal(mails.filter((m) => m.kind === "api_key.reveal").length, 20);
      const keys = await who.api<{ data: { name: string }[] }>("GET", "/api-keys");
      assert.deepEqual(keys.body.data.map((k) => k.name).sort(), ["first", "fourth", "second", "third"]);
    });

    test("every act of a key is audited as that key, known to the server or not", async () => {
      const env = await tenant();
      const who = await owner(env);
      const made = await revealedKey(env, who, "manager", ["keys:manage", "catalog:read"]);
      const key = made.api;
      // The first request teaches the server the key; the acts below use what it knows.
      assert.equal((await key("GET", "/api-keys")).status, 200);
      const pending = await key<{ id: string }>("POST", "/api-keys", {
        name: "by the key",
        scopes: ["catalog:read"],
      });
      assert.equal(pending.status, 201);
      assert.equal((await key("POST", `/api-keys/${pending.body.id}/verification`)).status, 201);
      const shown = await key("POST", `/api-keys/${pending.body.id}/reveal`, {
        code: await revealCode(env, who, "by the key"),
      });
      assert.equal(shown.status, 200);

      const rows = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ action: string; actor_type: string; actor: string }>(
              `select action, actor_type, actor from internal.audit_log
             where object_table = 'internal.api_keys' and object_id = $1 order by id`,
              [pending.body.id],
            )
          ).rows,
      );
      // The insert, the new code (service path), the reveal (service path): all the key's.
      assert.ok(rows.length >= 3, JSON.stringify(rows));
      assert.deepEqual(
        rows.map((r) => [r.actor_type, r.actor]),
        rows.map(() => ["api_key", made.id]),
      );
    });

    test("no request role reads internal.events; the delivery log still names each event's type", async () => {
      const env = await tenant();
      const who = await owner(env);
      const made = await revealedKey(env, who, "hooks", ["webhooks:manage", "catalog:read"]);
      const key = made.api;
      const endpoint = await key<{ id: string }>("POST", "/webhooks", {
        url: "http://127.0.0.1:9/hooks",
        events: ["release.live"],
      });
      assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
      const test = await key<{ event_type: string }>("POST", `/webhooks/${endpoint.body.id}/test`);
      assert.equal(test.status, 202, JSON.stringify(test.body));
      assert.equal(test.body.event_type, "webhook.test");
      const log = await key<{ data: { event_type: string }[] }>(
        "GET",
        `/webhooks/${endpoint.body.id}/deliveries`,
      );
      assert.deepEqual(
        log.body.data.map((d) => d.event_type),
        ["webhook.test"],
      );

      const claims: Claims = {
        role: "authenticated",
        tenant_id: env.tenant.id,
        account_id: who.account.id,
        account_role: "admin",
        api_key_id: made.id,
      };
      await assert.rejects(
        t().db.withRequestContext(claims, (tx) => tx.query("select * from internal.events")),
        (error: unknown) => asDbError(error)?.sqlstate === "42501",
      );
    });
  },
);
